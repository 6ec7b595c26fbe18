"""How many samples a step gets: a few first, more only where the answer is not yet clear.

A step starts with ``first`` samples a side; while the rank test calls it unclear, the count doubles
up to ``most``. A step still unclear at ``most`` is ambiguous: slower by about the threshold, or
too noisy to say; the bisect treats it as it treats a flaky step. A metric bisect's sample is one
execution (``tracker.metric_bisect``): six a side is the fewest at which a one-sided rank test of
two cases can reach p < 0.005 each.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracker.perf.rank import MIN_SAMPLES, Call


@dataclass(frozen=True)
class SamplingRule:
    first: int = 6
    most: int = 24

    def __post_init__(self) -> None:
        if not MIN_SAMPLES <= self.first <= self.most:
            raise ValueError(f"need {MIN_SAMPLES} <= first <= most samples, got first={self.first}, most={self.most}")

    def more(self, have: int, call: Call) -> int | None:
        """The sample count a side should reach before the next comparison, or None when the call
        stands (decided, or unclear with ``most`` samples already)."""
        if have < self.first:
            return self.first
        if call is not Call.UNCLEAR or have >= self.most:
            return None
        return min(have * 2, self.most)

    def ambiguous(self, have: int, call: Call) -> bool:
        """Unclear with every sample the rule allows."""
        return call is Call.UNCLEAR and have >= self.most
