"""Bisection over an ordered list of candidates: pure, no git, database or torch.

Index 0 of the candidates is the known-good end and the last index the known-bad end. A search
state is just the verdicts seen so far, so a session can be rebuilt from its stored steps and
resumed at the same point.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .verdicts import Verdict


@dataclass(frozen=True)
class BisectAnswer:
    """``culprit`` is the first bad index when it is pinned down; otherwise ``candidates`` holds
    every index that may be it (skipped revisions leave several)."""

    culprit: int | None
    candidates: tuple[int, ...]


class InconsistentVerdicts(ValueError):
    """A good verdict after a bad one: the results contradict a single transition."""


@dataclass
class BinarySearch:
    """Plain bisection that steps around untestable revisions without walking them one by one.

    Probed indices cut the open interval between the last good and the first bad index into
    segments of untested indices. The next probe is the middle of the longest segment, so with no
    skips this is bisection, and a skip is one more divider. A segment flanked by skips on both
    sides is presumed untestable (untestable revisions come in stretches) and never probed: a
    stretch of length L costs O(log L) probes, not L. The answer then lists every index that may
    be the first bad one, presumed-untestable ones included, so it is a range, never a guess.
    """

    size: int
    verdicts: dict[int, Verdict] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.size < 2:
            raise ValueError("a bisect needs at least the good and the bad end")

    def record(self, index: int, verdict: Verdict) -> None:
        if not 0 <= index < self.size:
            raise IndexError(f"index {index} outside 0..{self.size - 1}")
        self.verdicts[index] = verdict

    def bounds(self) -> tuple[int, int]:
        """(last good index, first bad index), the ends counting as good and bad."""
        goods = [i for i, v in self.verdicts.items() if v is Verdict.GOOD] + [0]
        bads = [i for i, v in self.verdicts.items() if v is Verdict.BAD] + [self.size - 1]
        low, high = max(goods), min(bads)
        if low >= high:
            raise InconsistentVerdicts(f"index {low} is good but index {high} before or at it is bad")
        return low, high

    def segments(self) -> list[range]:
        """Runs of untested indices between the bounds that are worth probing."""
        low, high = self.bounds()
        edges = [low, *sorted(i for i in self.verdicts if low < i < high), high]
        return [
            range(left + 1, right)
            for left, right in zip(edges, edges[1:])
            if right - left > 1
            and not (self.verdicts.get(left) is Verdict.SKIP and self.verdicts.get(right) is Verdict.SKIP)
        ]

    def next_index(self) -> int | None:
        """The index to probe next, or None when the answer is known."""
        segments = self.segments()
        if not segments:
            return None
        longest = max(segments, key=len)
        return longest[(len(longest) - 1) // 2]

    def answer(self) -> BisectAnswer:
        low, high = self.bounds()
        candidates = tuple(i for i in range(low + 1, high + 1) if self.verdicts.get(i) is not Verdict.GOOD)
        return BisectAnswer(culprit=high if candidates == (high,) else None, candidates=candidates)
