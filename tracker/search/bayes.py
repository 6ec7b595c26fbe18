"""Flake-aware search: a posterior over culprits plus "no culprit" (see ``posterior``)."""

from __future__ import annotations

import math

from tracker.core.verdicts import Verdict
from tracker.search.batch import Hypotheses, Stretch, choose_batch, nearest_allowed
from tracker.search.posterior import Group, View, entropy, posterior_of
from tracker.search.protocol import DEFAULT_PRIOR_STRENGTH, StrategyAnswer, check_k

# Rounds the guard is expected to add to a hard breakage once the posterior is sure.
GUARD_ROUNDS = 3


class BayesianSearch:
    """Flake-aware culprit finding: a posterior over "index c is the culprit" and "no culprit".

    Each culprit is a mixture of a hard breakage (every run from c on fails) and an intermittent one
    (runs from c on fail at an unknown rate); flakes before it fail at the probe's flake rate. Next
    points maximise the expected information about the culprit; the search stops at ``confidence`` in
    the posterior and in a guard that assumes an intermittent breakage. README ("How the flake-aware
    search decides") explains the model; ``scripts/sim_bisect.py`` measures it.
    ``posterior()`` puts the "no culprit" mass at index 0 and culprit c's at index c.
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
        guard_after_prior: tuple[float, float] = (1.0, 1.0),
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
        self.guard_after_prior = guard_after_prior
        self.fails: dict[int, int] = {}
        self.passes: dict[int, int] = {}
        self.skipped: set[int] = set()
        self.runs = 0
        self._groups: list[Group] | None = None
        self._guard_view: View | None = None
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
        self._groups = self._guard_view = None

    # -- posterior ----------------------------------------------------------------------------

    def _update(self) -> list[Group]:
        if self._groups is not None:
            return self._groups
        found = posterior_of(
            self.size,
            self.fails,
            self.passes,
            self.flake_prior,
            self.after_prior,
            self.no_culprit_prior,
            self.hard_weight,
        )
        self._groups, self._none, self._none_rate = found.groups, found.none, found.none_rate
        return found.groups

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

    def _top(self, view: View | None = None) -> tuple[int | None, float]:
        """(most probable culprit or None for "no culprit", its probability) in ``view`` (default:
        the posterior); ties to the lowest."""
        groups, none = view or View(self._update(), self._none)
        best, mass = None, none
        for g in groups:
            if g.per_culprit > mass:
                best, mass = g.lo, g.per_culprit
        return best, mass

    def _guard(self) -> View:
        """The posterior with the hard model left out (``hard_weight`` 0, the same "no culprit"
        prior) and ``guard_after_prior`` (uniform) on the after-culprit rate: what the runs say if
        the breakage may be intermittent at any rate. A pass after the culprit rules a hard
        culprit out, so lucky passes between the true culprit c and a later c' can leave the hard
        model sure of c'; this view stays unsure until c' - 1 has passed often enough for an
        intermittent culprit at or before it to be unlikely."""
        if self.hard_weight in (0.0, 1.0):
            return View(self._update(), self._none)
        if self._guard_view is None:
            found = posterior_of(
                self.size, self.fails, self.passes, self.flake_prior, self.guard_after_prior, self.no_culprit_prior, 0.0
            )
            self._guard_view = View(found.groups, found.none)
        return self._guard_view

    def _culprit_bar(self) -> float:
        """The confidence a culprit must reach: ``confidence``, or with the hard model all but
        ruled out, the stricter bar of the intermittent margin (README: the flake-aware search)."""
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

    def _deciding_view(self) -> View:
        """Where the next points are chosen: the posterior until it is sure, then the guard."""
        if self._top()[1] >= self.confidence:
            return self._guard()
        return View(self._update(), self._none)

    # -- decisions ----------------------------------------------------------------------------

    def done(self) -> bool:
        if self.max_runs is not None and self.runs >= self.max_runs:
            return True
        if self._sure():
            return True
        return len(self.skipped) >= self.size

    def next_indices(self, k: int, in_flight: frozenset[int] = frozenset()) -> list[int]:
        check_k(k)
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
        return choose_batch(self._hypotheses(view), k, in_flight, self._allowed)

    def _allowed(self, j: int) -> bool:
        return 0 <= j < self.size and j not in self.skipped

    def _most_informative(self, view: View) -> int | None:
        groups, none = view
        # P(fail at j) = base_p + sum over culprits c <= j of u_c; E[H | h] = base_s + sum of v_c.
        base_p = none * self._none_rate + sum(g.count * g.per_culprit * g.before for g in groups)
        base_s = none * entropy(self._none_rate) + sum(g.count * g.per_culprit * entropy(g.before) for g in groups)
        best_j, best_gain = None, -math.inf

        def consider(j: int, p: float, s: float) -> None:
            nonlocal best_j, best_gain
            gain = entropy(min(max(p, 0.0), 1.0)) - s
            if gain > best_gain + 1e-15 or (abs(gain - best_gain) <= 1e-15 and best_j is not None and j < best_j):
                best_j, best_gain = j, gain

        if self._allowed(0):
            consider(0, base_p, base_s)
        p0, s0 = base_p, base_s
        for g in groups:
            u = g.hard + g.intermittent * g.after - g.per_culprit * g.before
            v = g.per_culprit * (entropy(g.mixed_after) - entropy(g.before))
            # f(t) = H(p0 + t u) - (s0 + t v), t = j - lo + 1 in 1 .. count, concave in t.
            if abs(u) > 1e-300:
                target = 1.0 / (1.0 + math.exp(min(max(v / u, -700.0), 700.0)))
                t_star = (target - p0) / u
            else:
                t_star = 1.0 if v > 0 else float(g.count)
            t_star = min(max(t_star, 1.0), float(g.count))
            for t in nearest_allowed(t_star, 1, g.count, lambda t, lo=g.lo: self._allowed(lo + t - 1)):
                consider(g.lo + t - 1, p0 + t * u, s0 + t * v)
            p0 += g.count * u
            s0 += g.count * v
        return best_j

    def _hypotheses(self, view: View) -> Hypotheses:
        """``view`` as the batch chooser sees it: each group's culprits with their mixed after-rate."""
        stretches = [Stretch(g.lo, g.hi, g.per_culprit, g.before, g.mixed_after) for g in view.groups]
        return Hypotheses(stretches, view.none, self._none_rate)

    def remaining(self) -> int:
        """How many hypotheses the posterior still hesitates between: the fewest culprits (and
        "no culprit") that together hold ``confidence`` of it."""
        groups = self._update()
        masses = sorted([(g.per_culprit, g.count) for g in groups] + [(self._none, 1)], reverse=True)
        held, count = 0.0, 0
        for mass, members in masses:
            if held >= self.confidence:
                break
            needed = members if mass <= 0 else min(members, math.ceil((self.confidence - held) / mass - 1e-12))
            held += needed * mass
            count += needed
        return max(count, 1)

    def rounds_left(self, k: int) -> int:
        """An estimate, not a bound: the bits of the hesitation over what a run at the flake rate
        f tells (1 - H(f) bits, a noisy channel's capacity), ``k`` runs a round, plus
        ``GUARD_ROUNDS`` for the guard's confirmation; intermittent bugs take more."""
        check_k(k)
        if self.done():
            return 0
        fa, fb = self.flake_prior
        bits_per_run = 1.0 - entropy(fa / (fa + fb)) / math.log(2)
        rounds = math.ceil(math.log2(self.remaining()) / bits_per_run / math.log2(k + 1) - 1e-9) + GUARD_ROUNDS
        return rounds if self.max_runs is None else min(rounds, self.max_runs - self.runs)

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
