"""The strategy protocol every search speaks, and what a search concludes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

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
    """A search over candidates 0 .. size-1: index 0 is the known-good end, the last the known-bad end.

    Its state is the verdicts recorded so far, so a session is rebuilt by replaying its stored steps.
    ``next_indices(k, in_flight)`` proposes up to ``k`` indices (runs in flight are not proposed again;
    ``[]`` before ``done()`` means "wait for them"); ``record`` takes one run's verdict (an index may be
    recorded again; ``SKIP`` is untestable); ``remaining`` and ``rounds_left`` feed progress.
    """

    name: str

    def next_indices(self, k: int, in_flight: frozenset[int] = frozenset()) -> list[int]: ...

    def record(self, index: int, verdict: Verdict) -> None: ...

    def done(self) -> bool: ...

    def answer(self) -> StrategyAnswer: ...

    def remaining(self) -> int: ...

    def rounds_left(self, k: int) -> int: ...


def rounds_to_split(candidates: int, k: int) -> int:
    """Rounds of ``k`` points that cut ``candidates`` down to one, ceil(log_{k+1} n), in integers
    (``math.log(1000, 10)`` is 2.9999999999999996)."""
    rounds, left = 0, candidates
    while left > 1:
        left = -(-left // (k + 1))
        rounds += 1
    return rounds


def check_k(k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be at least 1, not {k}")
