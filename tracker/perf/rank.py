"""Is a revision slower than the good end by more than a threshold? A rank test on the samples.

Samples are compared on a log scale, so "slower by more than 5 %" is the same shift, log(1.05),
whatever the metric's unit and size; a higher-is-better metric (throughput) is negated there, so
"slower" always means a larger value. The step's samples, shrunk by the threshold, are set against
the good end's with two one-sided Mann-Whitney U tests, as Chromium's Pinpoint compares its
samples (a rank test: no assumption on the noise's shape, one outlier moves it by one rank):

* ``SLOWER``: even shrunk by the threshold, the step's samples rank above the good end's
  (p below 1 - confidence);
* ``NOT_SLOWER``: shrunk by the threshold, they rank below: the step is slower by less than the
  threshold, if at all;
* ``UNCLEAR``: neither, at this many samples; more may decide it (``tracker.perf.sampling``).

A change within the threshold, or within the noise, is never ``SLOWER``. The effect carries the
Hodges-Lehmann estimate of the change and its distribution-free (Moses) interval.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist, median

from tracker.core.metrics import Direction

MIN_SAMPLES = 5
"""Fewer samples a side cannot reach p < 0.01 in a one-sided rank test: no call is made on them."""


class Call(str, enum.Enum):
    SLOWER = "slower"
    NOT_SLOWER = "not_slower"
    UNCLEAR = "unclear"


@dataclass(frozen=True)
class Effect:
    """How much slower the step is than the good end, as a fraction (+0.12: 12 % slower; a
    throughput's fraction is good / step - 1): the estimate and its interval."""

    estimate: float
    low: float
    high: float

    def said(self) -> str:
        """``+12.0% [+9.1%, +15.2%]``."""
        return f"{self.estimate:+.1%} [{self.low:+.1%}, {self.high:+.1%}]"


@dataclass(frozen=True)
class RankComparison:
    call: Call
    p_slower: float
    """The one-sided p-value of "not slower by more than the threshold"."""
    p_not_slower: float
    """The one-sided p-value of "slower by the threshold or more"."""
    effect: Effect
    good_samples: int
    step_samples: int


def compare(
    good: Sequence[float],
    step: Sequence[float],
    *,
    threshold: float = 0.05,
    confidence: float = 0.99,
    direction: Direction = Direction.LOWER_IS_BETTER,
) -> RankComparison:
    """The step's samples against the good end's: slower by more than ``threshold`` (a fraction),
    not, or unclear at ``confidence``."""
    if not 0 <= threshold < 1:
        raise ValueError(f"threshold {threshold} is not a fraction in [0, 1)")
    if not 0.5 < confidence < 1:
        raise ValueError(f"confidence {confidence} is not in (0.5, 1)")
    good_s, step_s = _slowness(good, direction), _slowness(step, direction)
    effect = _effect(good_s, step_s, confidence)
    if min(len(good_s), len(step_s)) < MIN_SAMPLES:
        return RankComparison(Call.UNCLEAR, 1.0, 1.0, effect, len(good_s), len(step_s))
    shrunk = [s - math.log1p(threshold) for s in step_s]
    p_slower = _p(shrunk, good_s, "greater")
    p_not_slower = _p(shrunk, good_s, "less")
    alpha = 1 - confidence
    call = Call.SLOWER if p_slower < alpha else Call.NOT_SLOWER if p_not_slower < alpha else Call.UNCLEAR
    return RankComparison(call, p_slower, p_not_slower, effect, len(good_s), len(step_s))


def _slowness(samples: Sequence[float], direction: Direction) -> list[float]:
    """log(sample), negated for a higher-is-better metric: larger is slower."""
    if any(not (value > 0 and math.isfinite(value)) for value in samples):
        raise ValueError("samples must be positive and finite (times, rates) to be compared as ratios")
    sign = 1.0 if direction is Direction.LOWER_IS_BETTER else -1.0
    return [sign * math.log(value) for value in samples]


def _p(x: list[float], y: list[float], alternative: str) -> float:
    """Mann-Whitney U's p-value under the normal approximation with tie and continuity corrections:
    one method at every size, so a larger shift never gives a larger p-value."""
    # imported here: scipy.stats takes about a second to import, which every regtrack command
    # would pay; only a comparison of samples needs it
    from scipy.stats import mannwhitneyu

    if max(x + y) == min(x + y):
        return 1.0
    return float(mannwhitneyu(x, y, alternative=alternative, method="asymptotic").pvalue)


def _effect(good: list[float], step: list[float], confidence: float) -> Effect:
    """The Hodges-Lehmann shift (the median of every step - good difference) and Moses' interval
    (order statistics of those differences at the rank test's critical value), as fractions."""
    differences = sorted(s - g for s in step for g in good)
    if not differences:
        return Effect(math.nan, math.nan, math.nan)
    m, n, total = len(step), len(good), len(differences)
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    k = max(int(math.floor(m * n / 2 - z * math.sqrt(m * n * (m + n + 1) / 12))), 0)
    low, high = differences[k], differences[total - 1 - k]
    return Effect(math.expm1(median(differences)), math.expm1(low), math.expm1(high))
