"""Several runs chosen at once: the points whose joint outcome tells most about the culprit.

With W workers a round runs W revisions, and the W points must be chosen before any of them
answers. Points that are each the most informative alone are a poor batch: once the posterior
settles on a culprit c they are all c, while what is left to learn is whether c - 1 passes. So the
points are chosen greedily by *joint* information: each next point maximises the mutual
information between the hypothesis (a culprit or "no culprit") and the outcomes of all the points
in flight or chosen so far plus itself,

    I(S + j) = H(Y_S, Y_j) - E_h[H(Y_S, Y_j | h)],

the runs independent given the hypothesis, each failing at the hypothesis's predictive rate (the
rate before the culprit, or at and after it). Greedy selection of a monotone submodular objective
is within 1 - 1/e of the best batch; for one point it is the single most informative one.

**Cost.** Culprits that every point of S treats alike (all before it or all at or after it) and
that share a posterior group form a stretch with one outcome distribution over the 2^|S| outcomes
of S. For a candidate j inside a stretch, the joint distribution is linear in the number t of the
stretch's culprits at or before j, so I is concave in t and found by ternary search: O(stretches
x log(length) x 2^|S|) per point. At most ``JOINT_WINDOW`` points of S are taken jointly (the
newest), which bounds the outcome space at 2^8 for any number of workers.

A point is never chosen twice in a batch nor while it is in flight: a round runs each revision
once (reruns come in later rounds).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from tracker.search.posterior import entropy

JOINT_WINDOW = 8


@dataclass(frozen=True)
class Stretch:
    """Culprits ``lo .. hi``, each holding ``mass``; a run fails at ``before`` if it lies before
    the culprit, at ``after`` if at or after it."""

    lo: int
    hi: int
    mass: float
    before: float
    after: float

    @property
    def count(self) -> int:
        return self.hi - self.lo + 1


@dataclass(frozen=True)
class Hypotheses:
    """Culprit stretches in index order, and "no culprit" with its mass and failure rate."""

    stretches: Sequence[Stretch]
    none: float
    none_rate: float


def choose_batch(hypotheses: Hypotheses, k: int, in_flight: Iterable[int], allowed: Callable[[int], bool]) -> list[int]:
    """Up to ``k`` distinct allowed points, not in flight, chosen greedily by joint information; sorted."""
    taken = sorted(in_flight)
    chosen: list[int] = []
    for _ in range(k):
        window = (taken + chosen)[-(JOINT_WINDOW - 1) :]
        best = _best_next(hypotheses, window, lambda j: allowed(j) and j not in chosen and j not in taken)
        if best is None:
            break
        chosen.append(best)
    return sorted(chosen)


def _distribution(rates: Sequence[float]) -> list[float]:
    """P(outcome y) of independent runs failing at ``rates``; bit i of y is run i's failure."""
    dist = [1.0]
    for rate in rates:
        dist = [p * (1.0 - rate) for p in dist] + [p * rate for p in dist]
    return dist


def _entropy_of(dist: Iterable[float]) -> float:
    return -sum(p * math.log(p) for p in dist if p > 0.0)


class _Piece(NamedTuple):
    """A stretch cut at the window's points, with its culprits' joint distribution over the window."""

    stretch: Stretch
    per_culprit: list[float]  # mass x P(window outcome | culprit), one entry per outcome


def _pieces(hypotheses: Hypotheses, window: Sequence[int]) -> list[_Piece]:
    cuts = sorted(set(window))
    out = []
    for s in hypotheses.stretches:
        lo = s.lo
        for hi in [p for p in cuts if s.lo <= p < s.hi] + [s.hi]:
            rates = [s.after if hi <= p else s.before for p in window]
            out.append(_Piece(replace(s, lo=lo, hi=hi), [s.mass * p for p in _distribution(rates)]))
            lo = hi + 1
    return out


def _best_next(hypotheses: Hypotheses, window: Sequence[int], allowed: Callable[[int], bool]) -> int | None:
    """The allowed point j maximising I(window + j) (ties to the lowest j)."""
    pieces = _pieces(hypotheses, window)
    size = 1 << len(window)
    none = [hypotheses.none * p for p in _distribution([hypotheses.none_rate] * len(window))]
    # A run at j fails at a culprit's `after` rate if the culprit is at or before j, else at its
    # `before` rate. Suffix sums cover the pieces after the current one (j lies before all their
    # culprits), prefix sums those before it (j lies at or after all their culprits).
    suffix_fail, suffix_pass, suffix_h = _suffix_sums(pieces, size)
    prefix_fail, prefix_pass, prefix_h = [0.0] * size, [0.0] * size, 0.0
    r0 = hypotheses.none_rate
    base_fail = [v * r0 for v in none]
    base_pass = [v * (1.0 - r0) for v in none]
    base_h = hypotheses.none * entropy(r0)
    best_j, best_gain = None, -math.inf
    for index, (cut, d) in enumerate(pieces):
        rest_fail, rest_pass, rest_h = suffix_fail[index + 1], suffix_pass[index + 1], suffix_h[index + 1]

        def gain(
            t: int,
            cut: Stretch = cut,
            d: list[float] = d,
            rest_fail: list[float] = rest_fail,
            rest_pass: list[float] = rest_pass,
            rest_h: float = rest_h,
            prefix_h: float = prefix_h,
        ) -> float:
            """I(window + j) up to a constant, j = lo + t - 1: t culprits of the piece at or before j."""
            u = cut.count - t
            fail = [
                base_fail[y] + prefix_fail[y] + rest_fail[y] + d[y] * (t * cut.after + u * cut.before)
                for y in range(size)
            ]
            passed = [
                base_pass[y] + prefix_pass[y] + rest_pass[y] + d[y] * (t * (1.0 - cut.after) + u * (1.0 - cut.before))
                for y in range(size)
            ]
            conditional = base_h + prefix_h + rest_h + cut.mass * (t * entropy(cut.after) + u * entropy(cut.before))
            return _entropy_of(fail) + _entropy_of(passed) - conditional

        peak = _argmax_concave(gain, cut.count)
        for t in nearest_allowed(peak, 0, cut.count, lambda t, lo=cut.lo: allowed(lo + t - 1)):
            g = gain(t)
            j = cut.lo + t - 1
            if g > best_gain + 1e-12 or (abs(g - best_gain) <= 1e-12 and best_j is not None and j < best_j):
                best_j, best_gain = j, g
        for y in range(size):
            prefix_fail[y] += d[y] * cut.count * cut.after
            prefix_pass[y] += d[y] * cut.count * (1.0 - cut.after)
        prefix_h += cut.mass * cut.count * entropy(cut.after)
    return best_j


def _suffix_sums(pieces: Sequence[_Piece], size: int) -> tuple[list[list[float]], list[list[float]], list[float]]:
    """Entry i covers the pieces from i on, j lying before all their culprits (each fails at
    ``before``): the joint distribution split by j's outcome, and the conditional entropy."""
    fail, passed, h = [[0.0] * size], [[0.0] * size], [0.0]
    for cut, d in reversed(pieces):
        fail.append([a + v * cut.count * cut.before for a, v in zip(fail[-1], d)])
        passed.append([a + v * cut.count * (1.0 - cut.before) for a, v in zip(passed[-1], d)])
        h.append(h[-1] + cut.mass * cut.count * entropy(cut.before))
    return fail[::-1], passed[::-1], h[::-1]


def _argmax_concave(f: Callable[[int], float], high: int) -> int:
    """The integer t in 0 .. high maximising a concave f (the lowest of equal maxima)."""
    lo, hi = 0, high
    while hi - lo > 2:
        a, b = lo + (hi - lo) // 3, hi - (hi - lo) // 3
        if f(a) < f(b):
            lo = a + 1
        else:
            hi = b
    return max(range(lo, hi + 1), key=lambda t: (f(t), -t))


def nearest_allowed(t_star: float, low: int, high: int, allowed: Callable[[int], bool]) -> list[int]:
    """The allowed t in ``low .. high`` nearest t_star from below (at most floor(t_star)) and from
    above (at least ceil(t_star)): where a concave function of t peaks among the allowed t."""
    found = []
    t = math.floor(t_star)
    while t >= low and not allowed(t):
        t -= 1
    if t >= low:
        found.append(t)
    t = math.ceil(t_star)
    while t <= high and not allowed(t):
        t += 1
    if t <= high:
        found.append(t)
    return found
