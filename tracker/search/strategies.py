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
* ``remaining()`` and ``rounds_left(k)``: what is left, for progress: the candidates that may
  still be the answer (never more for binary and k-ary, 1 once a culprit is pinned down) and the
  rounds of ``k`` runs the search still expects to need (an estimate for the Bayesian search).

Strategies: :class:`BinarySearch` (plain bisection; k-ary when asked for several points),
:class:`KarySearch` (the same search under its own name), :class:`BayesianSearch` (flake-aware
posterior over culprits plus "no culprit") and :class:`AutoSearch` (binary while the verdicts are
consistent, Bayesian after a contradiction or when history says the probe flakes).
:func:`make_strategy` builds one by name.
"""

from __future__ import annotations

from tracker.search.auto import AutoSearch
from tracker.search.bayes import BayesianSearch
from tracker.search.binary import BinarySearch, KarySearch
from tracker.search.protocol import (
    DEFAULT_PRIOR_STRENGTH,
    STRATEGIES,
    InconsistentVerdicts,
    Strategy,
    StrategyAnswer,
    StrategyName,
)

__all__ = [
    "DEFAULT_PRIOR_STRENGTH",
    "STRATEGIES",
    "AutoSearch",
    "BayesianSearch",
    "BinarySearch",
    "InconsistentVerdicts",
    "KarySearch",
    "Strategy",
    "StrategyAnswer",
    "StrategyName",
]


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
