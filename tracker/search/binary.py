"""Plain bisection, and k-ary bisection when asked for several points per round."""

from __future__ import annotations

from dataclasses import dataclass, field

from tracker.core.verdicts import Verdict
from tracker.search.protocol import (
    InconsistentVerdicts,
    StrategyAnswer,
    check_k,
    rounds_to_split,
)


@dataclass
class BinarySearch:
    """Plain bisection that steps around untestable revisions without walking them one by one.

    Probed indices cut the open interval between the last good and the first bad index into
    segments of untested indices. The next probe is the middle of the longest segment, so with no
    skips this is bisection, and a skip is one more divider. A segment flanked by skips on both
    sides is presumed untestable (untestable revisions come in stretches) and never probed: a
    stretch of length L costs O(log L) probes, not L. The answer then lists every index that may
    be the first bad one, presumed-untestable ones included, so it is a range, never a guess.

    Asked for k > 1 points (or with runs in flight) it is the k-ary search of :class:`KarySearch`.
    It trusts every verdict: a rerun overwrites the index's verdict, and verdicts that contradict
    one transition raise :class:`InconsistentVerdicts` (use :class:`AutoSearch` for flaky probes).
    """

    size: int
    verdicts: dict[int, Verdict] = field(default_factory=dict)
    name: str = field(default="binary", init=False, repr=False)

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

    def next_indices(self, k: int, in_flight: frozenset[int] = frozenset()) -> list[int]:
        """Up to ``k`` points, placed so that the largest piece left is as small as possible.

        Each segment of untested indices ``left+1 .. right-1`` is a piece of ``right - left``
        candidates (``left+1 .. right``); runs in flight split segments like probed indices. The
        k points go one at a time to the segment whose pieces would be largest (a segment of P
        candidates with j points has pieces of at most ceil(P / (j+1))), then spread evenly inside
        each segment. A deterministic oracle needs at most ceil(log_{k+1}(size-1)) rounds of k.
        """
        check_k(k)
        if k == 1 and not in_flight:
            index = self.next_index()
            return [] if index is None else [index]
        segments: list[tuple[int, int]] = []  # (left, right) edges: candidates left+1 .. right
        for segment in self.segments():
            left = segment.start - 1
            for point in sorted(i for i in in_flight if segment.start <= i < segment.stop):
                segments.append((left, point))
                left = point
            segments.append((left, segment.stop))
        segments = [(left, right) for left, right in segments if right - left > 1]
        if not segments:
            return []
        counts = [0] * len(segments)
        for _ in range(k):
            # The segment whose largest piece is largest, among those with room for a point.
            best, best_piece = -1, 1
            for s, (left, right) in enumerate(segments):
                pieces = right - left
                if counts[s] < pieces - 1:
                    piece = -(-pieces // (counts[s] + 1))
                    if piece > best_piece:
                        best, best_piece = s, piece
            if best < 0:
                break
            counts[best] += 1
        points: list[int] = []
        for (left, right), j in zip(segments, counts):
            pieces = right - left
            # Piece sizes differ by at most one; the larger ones first (like next_index's middle).
            base, extra = divmod(pieces, j + 1)
            position = left
            for p in range(j):
                position += base + (1 if p < extra else 0)
                points.append(position)
        return sorted(points)

    def done(self) -> bool:
        return not self.segments()

    def remaining(self) -> int:
        """How many indices may still be the first bad one: the answer's candidates once done."""
        low, high = self.bounds()
        return high - low

    def rounds_left(self, k: int) -> int:
        """Rounds of ``k`` probes the search still needs with a deterministic oracle and no more
        skips (an upper bound then): ceil(log_{k+1} n) over the candidates of its segments."""
        check_k(k)
        segments = self.segments()
        return rounds_to_split(sum(len(s) + 1 for s in segments), k) if segments else 0

    def answer(self) -> StrategyAnswer:
        low, high = self.bounds()
        candidates = tuple(i for i in range(low + 1, high + 1) if self.verdicts.get(i) is not Verdict.GOOD)
        return StrategyAnswer(culprit=high if candidates == (high,) else None, candidates=candidates)


@dataclass
class KarySearch(BinarySearch):
    """k-ary search: with W workers, W points per round that minimise the largest remaining
    interval, runs in flight counting as dividers (:meth:`BinarySearch.next_indices`).

    With a deterministic oracle and no skips, a round of W points leaves ceil(N / (W+1)) of the N
    candidates, so the ``n = size - 1`` candidates (indices 1 .. size-1) take at most
    ceil(log_{W+1} n) rounds. Skips are handled like :class:`BinarySearch` (segments).
    """

    name: str = field(default="kary", init=False, repr=False)
