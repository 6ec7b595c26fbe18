"""A revision judged on one metric over every case of its probe: slower when any case is.

Each case (a batch shape, say) is compared on its own samples (``tracker.perf.rank``); the step is
``SLOWER`` when one case is, ``NOT_SLOWER`` when every case is not, and ``UNCLEAR`` otherwise. Each
case is tested at a confidence raised for the number of cases (Bonferroni), so that a revision no
slower anywhere is called slower in at most ``1 - confidence`` of comparisons however many cases
the probe has.
"""

from __future__ import annotations

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
) -> CaseCalls:
    """``step`` against ``good``, case by case; both hold the same cases."""
    if not good or set(good) != set(step):
        raise ValueError(f"the step's cases {sorted(step)} are not the good end's {sorted(good)}")
    per_case = 1 - (1 - confidence) / len(good)
    comparisons = {
        case: compare(good[case], step[case], threshold=threshold, confidence=per_case, direction=direction)
        for case in sorted(good)
    }
    calls = {comparison.call for comparison in comparisons.values()}
    if Call.SLOWER in calls:
        call = Call.SLOWER
    elif calls == {Call.NOT_SLOWER}:
        call = Call.NOT_SLOWER
    else:
        call = Call.UNCLEAR
    return CaseCalls(call, comparisons)


def fewest(samples: Samples) -> int:
    """The sample count of the case with the fewest (0 for none)."""
    return min((len(values) for values in samples.values()), default=0)
