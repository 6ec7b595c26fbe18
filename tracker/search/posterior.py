"""The posterior of the Bayesian search, as a pure function of the runs seen: culprits that share
the same runs before and after them form a group with one likelihood.

Two models of a culprit c: a hard breakage (every run from c on fails; runs before c fail at the
flake rate) and an intermittent one (runs from c on fail at an unknown rate, Beta(after_prior));
plus "no culprit" (every failure is a flake). Flake and after-culprit rates are integrated out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple


def betaln(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def entropy(p: float) -> float:
    """Binary entropy in nats."""
    if p <= 0.0 or p >= 1.0:
        return 0.0
    return -p * math.log(p) - (1.0 - p) * math.log1p(-p)


@dataclass(frozen=True)
class Group:
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

    @property
    def mixed_after(self) -> float:
        """The predictive failure rate at or after a culprit of this group, both models mixed."""
        return (self.hard + self.intermittent * self.after) / self.per_culprit if self.per_culprit > 0 else self.after


class View(NamedTuple):
    """A distribution over the hypotheses: per-culprit masses by group, and "no culprit"."""

    groups: list[Group]
    none: float


@dataclass(frozen=True)
class Posterior:
    groups: list[Group]
    none: float
    """P(no culprit)."""
    none_rate: float
    """The predictive failure rate under "no culprit"."""


def posterior_of(
    size: int,
    fails: Mapping[int, int],
    passes: Mapping[int, int],
    flake_prior: tuple[float, float],
    after_prior: tuple[float, float],
    no_culprit_prior: float,
    hard_weight: float,
) -> Posterior:
    """The posterior over culprits 1..size-1 and "no culprit" given failing and passing run counts per index."""
    fa, fb = flake_prior
    ga, gb = after_prior
    flake_norm, after_norm = betaln(fa, fb), betaln(ga, gb)
    observed = sorted(set(fails) | set(passes))
    total_f = sum(fails.values())
    total_p = sum(passes.values())
    n_culprits = size - 1
    log_hard = math.log((1 - no_culprit_prior) * hard_weight / n_culprits) if hard_weight > 0 else -math.inf
    log_int = math.log((1 - no_culprit_prior) * (1 - hard_weight) / n_culprits) if hard_weight < 1 else -math.inf
    raw: list[tuple[int, int, float, float, int, int, int, int]] = []
    f_before = p_before = 0
    for g in range(len(observed) + 1):
        lo = observed[g - 1] + 1 if g > 0 else 1
        hi = observed[g] if g < len(observed) else size - 1
        lo, hi = max(lo, 1), min(hi, size - 1)
        if lo <= hi:
            f_after, p_after = total_f - f_before, total_p - p_before
            before_ll = betaln(fa + f_before, fb + p_before) - flake_norm
            hard = log_hard + before_ll if p_after == 0 else -math.inf
            inter = log_int + before_ll + betaln(ga + f_after, gb + p_after) - after_norm
            raw.append((lo, hi, hard, inter, f_before, p_before + f_before, f_after, f_after + p_after))
        if g < len(observed):
            f_before += fails.get(observed[g], 0)
            p_before += passes.get(observed[g], 0)
    none_ll = (
        math.log(no_culprit_prior) + betaln(fa + total_f, fb + total_p) - flake_norm
        if no_culprit_prior > 0
        else -math.inf
    )
    top = max([none_ll] + [max(r[2], r[3]) for r in raw])
    # Normalise: sum over groups of count * (e^hard + e^int) + e^none.
    total = math.exp(none_ll - top) + sum(
        (r[1] - r[0] + 1) * (math.exp(r[2] - top) + math.exp(r[3] - top)) for r in raw
    )
    groups = []
    for lo, hi, hard, inter, f_b, n_b, f_a, n_a in raw:
        groups.append(
            Group(
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
    return Posterior(groups, math.exp(none_ll - top) / total, (fa + total_f) / (fa + fb + total_f + total_p))
