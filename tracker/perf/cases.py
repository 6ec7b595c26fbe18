"""A revision judged on one metric over every case of its probe: slower when any case is.

Each case (a batch shape, say) is compared on its own samples (``tracker.perf.rank``); the step is
``SLOWER`` when one case is, ``NOT_SLOWER`` when every case is not, and ``UNCLEAR`` otherwise. Each
case is tested at a confidence raised for the number of cases (Bonferroni), so that a revision no
slower anywhere is called slower in at most ``1 - confidence`` of comparisons however many cases
the probe has.

A bisect also passes a ``margin``: half the bad end's change (its lower bound, on the log scale)
in the case the bad end slowed most. A revision that no case shows slower by more than the
threshold, and whose most-slowed case is shown slower by less than the margin, is ``NOT_SLOWER``
too: it sits nearer the good end than the bad one, which is all a search for the one step between
them asks, and the case the step moved most is the one that tells. Without it, a revision at the
good end's level is only "not slower" once every case is shown within the threshold, which at
10 % noise and a 5 % threshold takes more executions than the sampling rule allows
(``scripts/sim_perf_bisect.py``), and a noisy case the step hardly moved would hold every
revision ambiguous.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tracker.core.metrics import Direction
from tracker.perf.rank import Call, RankComparison, compare

Samples = Mapping[str, Sequence[float]]
"""A metric's samples at one revision, by case id."""


@dataclass(frozen=True)
class CaseCalls:
    call: Call
    comparisons: Mapping[str, RankComparison]

    @property
    def worst(self) -> tuple[str, RankComparison]:
        """The case slowed the most (by its estimate), with its comparison."""
        return max(self.comparisons.items(), key=lambda item: item[1].effect.estimate)

    @property
    def largest(self) -> tuple[str, RankComparison]:
        """The case changed the most either way (a fix speeds up), with its comparison."""
        return max(self.comparisons.items(), key=lambda item: abs(item[1].effect.estimate))


def judge_cases(
    good: Samples,
    step: Samples,
    *,
    threshold: float,
    confidence: float,
    direction: Direction = Direction.LOWER_IS_BETTER,
    margin: Margin | None = None,
) -> CaseCalls:
    """``step`` against ``good``, case by case; both hold the same cases."""
    if not good or set(good) != set(step):
        raise ValueError(f"the step's cases {sorted(step)} are not the good end's {sorted(good)}")
    per_case = 1 - (1 - confidence) / len(good)

    def compared(case: str, limit: float) -> RankComparison:
        return compare(good[case], step[case], threshold=limit, confidence=per_case, direction=direction)

    comparisons = {case: compared(case, threshold) for case in sorted(good)}
    calls = {comparison.call for comparison in comparisons.values()}
    if Call.SLOWER in calls:
        return CaseCalls(Call.SLOWER, comparisons)
    if calls == {Call.NOT_SLOWER}:
        return CaseCalls(Call.NOT_SLOWER, comparisons)
    if margin is not None and margin.limit > threshold and margin.case in good:
        if compared(margin.case, margin.limit).call is Call.NOT_SLOWER:
            return CaseCalls(Call.NOT_SLOWER, comparisons)
    return CaseCalls(Call.UNCLEAR, comparisons)


@dataclass(frozen=True)
class Margin:
    """Half the bad end's change in ``case``, the case it slowed most, as a fraction."""

    case: str
    limit: float


def margin_of(end: CaseCalls) -> Margin:
    """The margin of a bad end judged against the good end: from the lower bound of its most-slowed
    case's interval, halved on the log scale."""
    case, comparison = end.worst
    return Margin(case, math.sqrt(1 + max(comparison.effect.low, 0.0)) - 1)


def fewest(samples: Samples) -> int:
    """The sample count of the case with the fewest (0 for none)."""
    return min((len(values) for values in samples.values()), default=0)
