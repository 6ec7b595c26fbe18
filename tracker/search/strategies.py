"""The search strategies by their CLI names (``make_strategy``); each speaks
``tracker.search.protocol.Strategy``. Pure: no git, database or torch."""

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
    deterministic: bool = False,
) -> Strategy:
    """A strategy by its CLI name. ``workers`` is only checked here: the caller asks each round for
    ``next_indices(workers, in_flight)``. ``flake_rate_prior`` is the probe's observed flake rate
    in stored history (None: unknown; bayes then assumes 0.05) and ``prior_strength`` how many runs
    it rests on, as pseudo-runs of the Bayesian prior (None: ``DEFAULT_PRIOR_STRENGTH``).

    With ``deterministic`` (the oracle repeats itself exactly) the flake-aware names ``auto`` and
    ``bayes`` trust every verdict as ``binary`` does: one verdict per index is final, so no index
    is asked for twice and no confirmation is sought."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, not {workers}")
    if deterministic and name in ("auto", "bayes"):
        return BinarySearch(size)
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
