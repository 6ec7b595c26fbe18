"""Bisection over an ordered list of candidates: pure, no git, database or torch.

Index 0 of the candidates is the known-good end and the last index the known-bad end. A search
state is just the verdicts seen so far, so a session can be rebuilt from its stored steps and
resumed at the same point (replay them in the order they were recorded).

Every strategy speaks the :class:`Strategy` protocol:

* ``next_indices(k, in_flight)``: up to ``k`` indices to run next. Runs still in flight count as
  dividers (they are not proposed again, and the new points are placed around them). ``[]`` means
  done, or, when ``done()`` is false, "wait for the runs in flight".
* ``record(index, verdict)``: one run's verdict. The same index may be recorded several times
  (reruns, or a stored result next to a fresh one); ``SKIP`` means untestable. End verdicts may be
  recorded too: whether the ends were verified is the caller's business.
* ``done()`` and ``answer()`` (a :class:`StrategyAnswer`).

Strategies: :class:`BinarySearch` (plain bisection; k-ary when asked for several points),
:class:`KarySearch` (the same search under its own name), :class:`BayesianSearch` (flake-aware
posterior over culprits plus "no culprit") and :class:`AutoSearch` (binary while the verdicts are
consistent, Bayesian after a contradiction or when history says the probe flakes).
:func:`make_strategy` builds one by name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Literal, NamedTuple, Protocol, runtime_checkable

from tracker.core.verdicts import Verdict

StrategyName = Literal["auto", "binary", "kary", "bayes"]
STRATEGIES: tuple[str, ...] = ("auto", "binary", "kary", "bayes")
# Pseudo-runs behind the flake-rate prior when no history says how many runs it rests on.
DEFAULT_PRIOR_STRENGTH = 50.0


@dataclass(frozen=True)
class StrategyAnswer:
    """What a search concluded.

    ``culprit`` is the first bad index when it is pinned down (deterministic strategies) or the
    most probable one (Bayesian; see ``confidence``); otherwise ``candidates`` holds every index
    that may be it (skipped revisions leave several; for the Bayesian search, the smallest set of
    indices holding ``confidence`` of the culprit mass). ``confidence`` is 1.0 for deterministic
    answers, else the posterior probability of the answer given (culprit, or "no culprit").
    ``no_culprit`` is the Bayesian verdict "the failure is flaky: no commit in the range broke it".
    ``fail_rate_before`` / ``fail_rate_after`` are the fractions of failing runs seen before and
    from the culprit on (None when the answer is deterministic or there were no such runs).
    """

    culprit: int | None
    candidates: tuple[int, ...]
    confidence: float = 1.0
    no_culprit: bool = False
    fail_rate_before: float | None = None
    fail_rate_after: float | None = None


# The name the session and the first tests know.
BisectAnswer = StrategyAnswer


class InconsistentVerdicts(ValueError):
    """A good verdict after a bad one: the results contradict a single transition."""


@runtime_checkable
class Strategy(Protocol):
    name: str

    def next_indices(self, k: int, in_flight: frozenset[int] = frozenset()) -> list[int]: ...

    def record(self, index: int, verdict: Verdict) -> None: ...

    def done(self) -> bool: ...

    def answer(self) -> StrategyAnswer: ...


def _check_k(k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be at least 1, not {k}")


# --------------------------------------------------------------------------------------------
# Deterministic: binary and k-ary
# --------------------------------------------------------------------------------------------


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
        _check_k(k)
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


# --------------------------------------------------------------------------------------------
# Bayesian, flake-aware
# --------------------------------------------------------------------------------------------


def _betaln(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def _entropy(p: float) -> float:
    """Binary entropy in nats."""
    if p <= 0.0 or p >= 1.0:
        return 0.0
    return -p * math.log(p) - (1.0 - p) * math.log1p(-p)


@dataclass(frozen=True)
class _Group:
    """Culprits ``lo .. hi`` share the same runs before and after them, hence the same likelihood."""

    lo: int
    hi: int
    hard: float  # posterior mass of "hard breakage at c", per culprit c in the group
    intermittent: float  # posterior mass of "intermittent breakage at c", per culprit c
    before: float  # predictive failure rate of a run before c
    after: float  # predictive failure rate of a run at or after c, intermittent model
    fails_before: int
    runs_before: int
    fails_after: int
    runs_after: int

    @property
    def per_culprit(self) -> float:
        return self.hard + self.intermittent

    @property
    def count(self) -> int:
        return self.hi - self.lo + 1


class _View(NamedTuple):
    """A distribution over the hypotheses: per-culprit masses by group, and "no culprit"."""

    groups: list[_Group]
    none: float


class BayesianSearch:
    """Flake-aware culprit finding: a posterior over "index c is the culprit" (c in 1 .. size-1)
    and "no culprit" (the failure is flaky; the bad end's failure was noise).

    **Model.** Each run at index j fails or passes (``SKIP`` runs carry no evidence; the index is
    never proposed again but stays a possible culprit). Hypotheses, each with its own likelihood
    of the fail/pass counts:

    * *hard breakage at c*: runs at j >= c always fail; runs at j < c fail at the flake rate f.
    * *intermittent breakage at c*: runs before c fail at rate f, runs from c on at rate g.
    * *no culprit*: every run fails at rate f.

    f is unknown with a Beta prior whose mean is the probe's flake rate from history
    (``flake_rate``) and whose weight is ``prior_strength`` pseudo-runs; g has a Beta prior
    (``after_prior``) leaning towards high rates. Both are integrated out: the likelihood of
    F fails and P passes under Beta(a, b) is the Beta-Binomial marginal B(a+F, b+P) / B(a, b)
    (the binomial coefficients are common to all hypotheses and cancel).

    **Why a mixture.** The prior over models is ``no_culprit_prior`` on "no culprit" and the rest
    split ``hard_weight`` : 1 - ``hard_weight`` between hard and intermittent, culprits uniform.
    The hard model is the limit g = 1, which a Beta prior gives zero density: alone, the
    intermittent model would need several failing reruns before it believes that runs after the
    culprit always fail, so hard breakages (the common case) would cost runs; alone, the hard
    model lets one lucky pass after the culprit rule the culprit out for ever. Averaging both
    (Bayesian model averaging, not selection) keeps the hard model's speed, it converges as fast
    as a known-noise bisection when the breakage is hard, and the intermittent model's safety: a
    pass after the culprit only moves the mass to the intermittent component. The posterior over
    a culprit is the sum of its two components.

    **Cost.** Culprits between two consecutive probed indices share their likelihood, so the
    posterior is kept per group of such culprits: O(m) work per run for m probed indices,
    independent of the range's length.

    **Next points.** With one point to choose (and nothing in flight), the index (reruns allowed,
    the ends included) that maximises the expected information of its run about the hypothesis,
    I(j) = H(run at j) - E_c[H(run at j | c)], c ranging over the culprits and "no culprit", each
    with its predictive failure rates (a culprit's hard and intermittent components mixed: the
    information sought is about *which* commit, not about which model).
    Within a group I(j) is concave in j, so the best point of each group is found in closed form.
    For k points or runs in flight: the culprit posterior's quantiles at i/(T+1), T = k + in
    flight, less the ones nearest the runs in flight; the same index may come back (reruns).

    **Stopping.** Done when the top hypothesis (a single culprit, or "no culprit") reaches
    ``confidence`` in the posterior and, for a culprit, in the *guard* too, the posterior without
    the hard model (:meth:`_guard`); when ``max_runs`` runs have been recorded (every recorded
    verdict counts, ends and skips included); or when nothing is left to probe. The guard is what
    keeps the confidence honest for intermittent bugs: without it, lucky passes just after the
    culprit let the hard model name a later commit at 0.95 while it is wrong up to 15 % of the
    time (measured by ``scripts/sim_bisect.py``). It costs a hard breakage two to five more runs,
    spent at the culprit's parent side. Once the posterior is sure, the next points are chosen in
    the guard.

    **Margin for intermittent bugs.** Once the runs have all but ruled out a hard breakage (the
    hard model holds less than half the posterior), the culprit rests on an after-culprit failure
    rate learned from the same runs that place it, and at low rates the posterior overstates
    itself: at a stated 0.95 the simulation measured 0.84 to 0.92 accuracy for a rate of 0.5.
    There a culprit must leave ``intermittent_margin`` times less doubt, 1 - (1 - confidence) /
    margin in the posterior and the guard (0.99 for 0.95 and the default 5). In a hard breakage
    the hard model keeps most of the posterior, the bar stays at ``confidence``, and the search
    costs no more runs than without the margin (measured).

    :meth:`posterior` returns a list of length ``size``: index 0 (never a culprit) holds the
    "no culprit" mass, index c the mass of "c is the culprit"; it sums to 1.
    """

    name = "bayes"

    def __init__(
        self,
        size: int,
        flake_rate: float = 0.05,
        confidence: float = 0.95,
        max_runs: int | None = None,
        *,
        prior_strength: float = DEFAULT_PRIOR_STRENGTH,
        after_prior: tuple[float, float] = (2.0, 1.0),
        no_culprit_prior: float = 0.5,
        hard_weight: float = 0.5,
        intermittent_margin: float = 5.0,
    ) -> None:
        if size < 2:
            raise ValueError("a bisect needs at least the good and the bad end")
        if not 0.0 <= flake_rate < 1.0:
            raise ValueError(f"flake rate {flake_rate} outside [0, 1)")
        if not 0.0 < confidence < 1.0:
            raise ValueError(f"confidence {confidence} outside (0, 1)")
        if not 0.0 <= no_culprit_prior < 1.0 or not 0.0 <= hard_weight <= 1.0:
            raise ValueError("model weights outside [0, 1)")
        if intermittent_margin < 1.0:
            raise ValueError(f"intermittent margin {intermittent_margin} below 1")
        self.size = size
        self.flake_rate = flake_rate
        self.confidence = confidence
        self.max_runs = max_runs
        mean = min(max(flake_rate, 1e-3), 0.9)
        self.flake_prior = (mean * prior_strength, (1.0 - mean) * prior_strength)
        self.after_prior = after_prior
        self.no_culprit_prior = no_culprit_prior
        self.hard_weight = hard_weight
        self.intermittent_margin = intermittent_margin
        self.fails: dict[int, int] = {}
        self.passes: dict[int, int] = {}
        self.skipped: set[int] = set()
        self.runs = 0
        self._groups: list[_Group] | None = None
        self._none = 0.0
        self._none_rate = 0.0

    # -- evidence -----------------------------------------------------------------------------

    def record(self, index: int, verdict: Verdict) -> None:
        if not 0 <= index < self.size:
            raise IndexError(f"index {index} outside 0..{self.size - 1}")
        self.runs += 1
        if verdict is Verdict.SKIP:
            self.skipped.add(index)
            return
        counts = self.fails if verdict is Verdict.BAD else self.passes
        counts[index] = counts.get(index, 0) + 1
        self._groups = None

    # -- posterior ----------------------------------------------------------------------------

    def _update(self) -> list[_Group]:
        if self._groups is not None:
            return self._groups
        fa, fb = self.flake_prior
        ga, gb = self.after_prior
        flake_norm, after_norm = _betaln(fa, fb), _betaln(ga, gb)
        observed = sorted(set(self.fails) | set(self.passes))
        total_f = sum(self.fails.values())
        total_p = sum(self.passes.values())
        n_culprits = self.size - 1
        log_hard = math.log((1 - self.no_culprit_prior) * self.hard_weight / n_culprits) if self.hard_weight > 0 else -math.inf
        log_int = (
            math.log((1 - self.no_culprit_prior) * (1 - self.hard_weight) / n_culprits) if self.hard_weight < 1 else -math.inf
        )
        raw: list[tuple[int, int, float, float, int, int, int, int]] = []
        f_before = p_before = 0
        for g in range(len(observed) + 1):
            lo = observed[g - 1] + 1 if g > 0 else 1
            hi = observed[g] if g < len(observed) else self.size - 1
            lo, hi = max(lo, 1), min(hi, self.size - 1)
            if lo <= hi:
                f_after, p_after = total_f - f_before, total_p - p_before
                before_ll = _betaln(fa + f_before, fb + p_before) - flake_norm
                hard = log_hard + before_ll if p_after == 0 else -math.inf
                inter = log_int + before_ll + _betaln(ga + f_after, gb + p_after) - after_norm
                raw.append((lo, hi, hard, inter, f_before, p_before + f_before, f_after, f_after + p_after))
            if g < len(observed):
                f_before += self.fails.get(observed[g], 0)
                p_before += self.passes.get(observed[g], 0)
        none_ll = (
            math.log(self.no_culprit_prior) + _betaln(fa + total_f, fb + total_p) - flake_norm
            if self.no_culprit_prior > 0
            else -math.inf
        )
        top = max([none_ll] + [max(r[2], r[3]) for r in raw])
        # Normalise: sum over groups of count * (e^hard + e^int) + e^none.
        total = math.exp(none_ll - top) + sum((r[1] - r[0] + 1) * (math.exp(r[2] - top) + math.exp(r[3] - top)) for r in raw)
        groups = []
        for lo, hi, hard, inter, f_b, n_b, f_a, n_a in raw:
            groups.append(
                _Group(
                    lo=lo,
                    hi=hi,
                    hard=math.exp(hard - top) / total,
                    intermittent=math.exp(inter - top) / total,
                    before=(fa + f_b) / (fa + fb + n_b),
                    after=(ga + f_a) / (ga + gb + n_a),
                    fails_before=f_b,
                    runs_before=n_b,
                    fails_after=f_a,
                    runs_after=n_a,
                )
            )
        self._groups = groups
        self._none = math.exp(none_ll - top) / total
        self._none_rate = (fa + total_f) / (fa + fb + total_f + total_p)
        return groups

    def posterior(self) -> list[float]:
        """Index 0: P(no culprit); index c >= 1: P(c is the culprit). Sums to 1."""
        groups = self._update()
        out = [0.0] * self.size
        out[0] = self._none
        for g in groups:
            for c in range(g.lo, g.hi + 1):
                out[c] = g.per_culprit
        return out

    def components(self) -> dict[str, object]:
        """The posterior split by model: ``{"none": float, "hard": list, "intermittent": list}``,
        each list of length ``size`` (index 0 is 0.0). hard + intermittent + none sums to 1."""
        groups = self._update()
        hard, inter = [0.0] * self.size, [0.0] * self.size
        for g in groups:
            for c in range(g.lo, g.hi + 1):
                hard[c], inter[c] = g.hard, g.intermittent
        return {"none": self._none, "hard": hard, "intermittent": inter}

    def no_culprit_probability(self) -> float:
        self._update()
        return self._none

    def _top(self, view: _View | None = None) -> tuple[int | None, float]:
        """(most probable culprit or None for "no culprit", its probability) in ``view`` (default:
        the posterior); ties to the lowest."""
        groups, none = view or _View(self._update(), self._none)
        best, mass = None, none
        for g in groups:
            if g.per_culprit > mass:
                best, mass = g.lo, g.per_culprit
        return best, mass

    def _guard(self) -> _View:
        """The posterior with the hard model left out (``hard_weight`` 0, the same "no culprit"
        prior): what the runs say if the breakage may be intermittent. A pass after the culprit
        rules a hard culprit out, so lucky passes between the true culprit c and a later c' can
        leave the hard model sure of c'; this view stays unsure until c' - 1 has passed often
        enough for an intermittent culprit at or before it to be unlikely."""
        groups = self._update()
        if self.hard_weight in (0.0, 1.0):
            return _View(groups, self._none)
        scale = 1.0 / (1.0 - self.hard_weight)
        total = self._none + sum(g.count * g.intermittent * scale for g in groups)
        return _View([replace(g, hard=0.0, intermittent=g.intermittent * scale / total) for g in groups], self._none / total)

    def _culprit_bar(self) -> float:
        """The confidence a culprit must reach: ``confidence``, or with the hard model all but
        ruled out, the stricter bar of the intermittent margin (see the class docstring)."""
        hard_mass = sum(g.count * g.hard for g in self._update())
        if hard_mass >= 0.5:
            return self.confidence
        return 1.0 - (1.0 - self.confidence) / self.intermittent_margin

    def _sure(self) -> bool:
        """The posterior names an answer with ``confidence`` and, for a culprit, the guard names
        the same one, both at the culprit's bar. "No culprit" needs no guard: the hard model is
        what the guard leaves out, and it is the model that gives "no culprit" no room."""
        best, mass = self._top()
        if mass < self.confidence:
            return False
        if best is None:
            return True
        bar = self._culprit_bar()
        guarded, guarded_mass = self._top(self._guard())
        return mass >= bar and guarded == best and guarded_mass >= bar

    def _deciding_view(self) -> _View:
        """Where the next points are chosen: the posterior until it is sure, then the guard."""
        if self._top()[1] >= self.confidence:
            return self._guard()
        return _View(self._update(), self._none)

    # -- decisions ----------------------------------------------------------------------------

    def done(self) -> bool:
        if self.max_runs is not None and self.runs >= self.max_runs:
            return True
        if self._sure():
            return True
        return len(self.skipped) >= self.size

    def next_indices(self, k: int, in_flight: frozenset[int] = frozenset()) -> list[int]:
        _check_k(k)
        if self.done():
            return []
        if self.max_runs is not None:
            k = min(k, self.max_runs - self.runs - len(in_flight))
            if k <= 0:
                return []
        view = self._deciding_view()
        if k == 1 and not in_flight:
            best = self._most_informative(view)
            return [] if best is None else [best]
        return self._quantiles(k, in_flight, view)

    def _allowed(self, j: int) -> bool:
        return 0 <= j < self.size and j not in self.skipped

    def _most_informative(self, view: _View) -> int | None:
        groups, none = view
        # P(fail at j) = base_p + sum over culprits c <= j of u_c; E[H | h] = base_s + sum of v_c.
        base_p = none * self._none_rate + sum(g.count * g.per_culprit * g.before for g in groups)
        base_s = none * _entropy(self._none_rate) + sum(g.count * g.per_culprit * _entropy(g.before) for g in groups)
        best_j, best_gain = None, -math.inf

        def consider(j: int, p: float, s: float) -> None:
            nonlocal best_j, best_gain
            gain = _entropy(min(max(p, 0.0), 1.0)) - s
            if gain > best_gain + 1e-15 or (abs(gain - best_gain) <= 1e-15 and best_j is not None and j < best_j):
                best_j, best_gain = j, gain

        if self._allowed(0):
            consider(0, base_p, base_s)
        p0, s0 = base_p, base_s
        for g in groups:
            u = g.hard + g.intermittent * g.after - g.per_culprit * g.before
            mixed = (g.hard + g.intermittent * g.after) / g.per_culprit if g.per_culprit > 0 else g.after
            v = g.per_culprit * (_entropy(mixed) - _entropy(g.before))
            # f(t) = H(p0 + t u) - (s0 + t v), t = j - lo + 1 in 1 .. count, concave in t.
            if abs(u) > 1e-300:
                target = 1.0 / (1.0 + math.exp(min(max(v / u, -700.0), 700.0)))
                t_star = (target - p0) / u
            else:
                t_star = 1.0 if v > 0 else float(g.count)
            t_star = min(max(t_star, 1.0), float(g.count))
            for t in self._nearest_allowed(g, t_star):
                consider(g.lo + t - 1, p0 + t * u, s0 + t * v)
            p0 += g.count * u
            s0 += g.count * v
        return best_j

    def _nearest_allowed(self, g: _Group, t_star: float) -> list[int]:
        """The allowed t (1-based within the group) nearest below and above t_star."""
        found = []
        t = int(math.floor(t_star))
        while t >= 1 and not self._allowed(g.lo + t - 1):
            t -= 1
        if t >= 1:
            found.append(t)
        t = int(math.ceil(t_star))
        while t <= g.count and not self._allowed(g.lo + t - 1):
            t += 1
        if t <= g.count:
            found.append(t)
        return found

    def _quantiles(self, k: int, in_flight: frozenset[int], view: _View) -> list[int]:
        groups = view.groups
        culprit_mass = sum(g.count * g.per_culprit for g in groups)
        total = k + len(in_flight)
        levels = [i / (total + 1) for i in range(1, total + 1)]
        points: list[int] = []
        cumulative, level = 0.0, 0
        for g in groups:
            for c in range(g.lo, g.hi + 1):
                cumulative += g.per_culprit / culprit_mass if culprit_mass > 0 else 1.0 / (self.size - 1)
                while level < len(levels) and cumulative >= levels[level] - 1e-12:
                    points.append(c)
                    level += 1
        while len(points) < total:
            points.append(self.size - 1)
        for f in sorted(in_flight):  # the runs in flight stand for the quantiles nearest them
            points.remove(min(points, key=lambda p: (abs(p - f), p)))
            if not points:
                break
        chosen = []
        for p in points[:k]:
            q = self._snap(p)
            if q is not None:
                chosen.append(q)
        return sorted(chosen)

    def _snap(self, j: int) -> int | None:
        for d in range(self.size):
            for q in (j - d, j + d):
                if self._allowed(q):
                    return q
        return None

    def answer(self) -> StrategyAnswer:
        """The posterior's top hypothesis; a culprit's confidence is the lower of its probabilities
        in the posterior and in the guard (see :meth:`_guard`)."""
        groups = self._update()
        best, mass = self._top()
        if best is None:
            return StrategyAnswer(culprit=None, candidates=(), confidence=mass, no_culprit=True)
        # The smallest set of culprits holding `confidence` of the culprit mass (whole groups
        # are interchangeable, so take them by per-culprit mass, then cut the last one).
        culprit_mass = sum(g.count * g.per_culprit for g in groups)
        chosen: list[int] = []
        cumulative = 0.0
        for g in sorted(groups, key=lambda g: (-g.per_culprit, g.lo)):
            for c in range(g.lo, g.hi + 1):
                if cumulative >= self.confidence * culprit_mass:
                    break
                chosen.append(c)
                cumulative += g.per_culprit
        group = next(g for g in groups if g.lo == best)
        guarded = next(g.per_culprit for g in self._guard().groups if g.lo == best)
        return StrategyAnswer(
            culprit=best,
            candidates=tuple(sorted(chosen)),
            confidence=min(mass, guarded),
            no_culprit=False,
            fail_rate_before=group.fails_before / group.runs_before if group.runs_before else None,
            fail_rate_after=group.fails_after / group.runs_after if group.runs_after else None,
        )


# --------------------------------------------------------------------------------------------
# Auto: binary while consistent, Bayesian on contradiction
# --------------------------------------------------------------------------------------------


class AutoSearch:
    """The default: plain bisection while the verdicts are consistent, Bayesian once they are not.

    Binary phase: :class:`BinarySearch` (k-ary for several workers), then one confirmation rerun
    of the boundary it found: of the culprit (the first bad index) when the probe may flake, since
    a false failure is what sends a bisection astray, or, when history says the probe never flakes
    (``flake_rate_prior == 0``), of the last good index, since only a false pass (an intermittent
    bug) can. So a deterministic range costs at most ceil(log2 n) + 1 runs, n = size - 1.

    It switches to :class:`BayesianSearch`, replaying every verdict so far, when a contradiction
    appears: an index both GOOD and BAD (a rerun or a stored result disagrees), a BAD before a
    GOOD in index order, the good end BAD or the bad end GOOD; or from the start when
    ``flake_rate_prior`` (the probe's observed flake rate in history) is above ``flaky_threshold``.
    The default threshold 0.005 sends a 1 % flaky probe to the Bayesian search: at 1 % a
    10-probe bisection meets a false verdict about 5 % of the time, too often for the one check.
    ``max_runs`` counts every recorded verdict in both phases. ``switch_reason`` says why it
    switched (None while binary).
    """

    name = "auto"

    def __init__(
        self,
        size: int,
        confidence: float = 0.95,
        flake_rate_prior: float | None = None,
        max_runs: int | None = None,
        *,
        flaky_threshold: float = 0.005,
        **bayes_options: object,
    ) -> None:
        self.size = size
        self.confidence = confidence
        self.flake_rate_prior = flake_rate_prior
        self.max_runs = max_runs
        self.flaky_threshold = flaky_threshold
        self.bayes_options = bayes_options
        self.binary = BinarySearch(size)
        self.bayes: BayesianSearch | None = None
        self.switch_reason: str | None = None
        self.runs: list[tuple[int, Verdict]] = []
        self._max_good, self._min_bad = -1, size
        if flake_rate_prior is not None and flake_rate_prior > flaky_threshold:
            self._switch(f"the probe's flake rate in history is {flake_rate_prior:g}")

    @property
    def phase(self) -> str:
        return "binary" if self.bayes is None else "bayes"

    def _switch(self, reason: str) -> None:
        flake = self.flake_rate_prior if self.flake_rate_prior is not None else 0.05
        self.bayes = BayesianSearch(self.size, flake, self.confidence, self.max_runs, **self.bayes_options)  # type: ignore[arg-type]
        self.switch_reason = reason
        for index, verdict in self.runs:
            self.bayes.record(index, verdict)

    def _confirm_index(self) -> int:
        low, high = self.binary.bounds()
        return low if self.flake_rate_prior == 0 else high

    def record(self, index: int, verdict: Verdict) -> None:
        if not 0 <= index < self.size:
            raise IndexError(f"index {index} outside 0..{self.size - 1}")
        self.runs.append((index, verdict))
        if self.bayes is not None:
            self.bayes.record(index, verdict)
            return
        if verdict is Verdict.GOOD:
            self._max_good = max(self._max_good, index)
        elif verdict is Verdict.BAD:
            self._min_bad = min(self._min_bad, index)
        reason = None
        if verdict is Verdict.BAD and index == 0:
            reason = "the good end failed"
        elif verdict is Verdict.GOOD and index == self.size - 1:
            reason = "the bad end passed"
        elif self._min_bad <= self._max_good:
            reason = (
                f"index {index} is both good and bad"
                if self._min_bad == self._max_good
                else f"index {self._min_bad} is bad but index {self._max_good} after it is good"
            )
        if reason is not None:
            self._switch(reason)
            return
        self.binary.record(index, verdict)

    def _budget_spent(self) -> bool:
        return self.max_runs is not None and len(self.runs) >= self.max_runs

    def done(self) -> bool:
        if self.bayes is not None:
            return self.bayes.done()
        return self._budget_spent() or (self.binary.done() and self._confirmed())

    def _confirmed(self) -> bool:
        """The boundary to confirm has two verdicts (they agree, or the search would have switched),
        whenever they came: a stored result and a fresh one confirm it as well as a rerun. At an
        end of the range the caller's word is the first."""
        confirm = self._confirm_index()
        given = confirm in (0, self.size - 1)
        return given + sum(index == confirm for index, _ in self.runs) >= 2

    def next_indices(self, k: int, in_flight: frozenset[int] = frozenset()) -> list[int]:
        _check_k(k)
        if self.bayes is not None:
            return self.bayes.next_indices(k, in_flight)
        if self.done():
            return []
        if not self.binary.done():
            return self.binary.next_indices(k, in_flight)
        confirm = self._confirm_index()
        return [] if confirm in in_flight else [confirm]

    def answer(self) -> StrategyAnswer:
        if self.bayes is not None:
            return self.bayes.answer()
        return self.binary.answer()


def make_strategy(
    name: StrategyName,
    size: int,
    workers: int = 1,
    confidence: float = 0.95,
    max_runs: int | None = None,
    flake_rate_prior: float | None = None,
    prior_strength: float | None = None,
) -> Strategy:
    """A strategy by its CLI name. ``workers`` is only checked here: the caller asks each round for
    ``next_indices(workers, in_flight)``. ``flake_rate_prior`` is the probe's observed flake rate
    in stored history (None: unknown; bayes then assumes 0.05) and ``prior_strength`` how many runs
    it rests on, as pseudo-runs of the Bayesian prior (None: ``DEFAULT_PRIOR_STRENGTH``)."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, not {workers}")
    strength = DEFAULT_PRIOR_STRENGTH if prior_strength is None else prior_strength
    if name == "binary":
        return BinarySearch(size)
    if name == "kary":
        return KarySearch(size)
    if name == "bayes":
        flake = flake_rate_prior if flake_rate_prior is not None else 0.05
        return BayesianSearch(size, flake, confidence, max_runs, prior_strength=strength)
    if name == "auto":
        return AutoSearch(size, confidence, flake_rate_prior, max_runs, prior_strength=strength)
    raise ValueError(f"unknown strategy {name!r}; choose one of {', '.join(STRATEGIES)}")
