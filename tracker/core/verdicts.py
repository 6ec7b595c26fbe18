"""From probe outcomes to what a bisect needs to know about a revision."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


class Outcome(str, enum.Enum):
    """What one probe execution says about a revision.

    ``ERROR`` means the probe could not judge the revision (its code does not import, or the probe
    raised): the revision is untestable, not bad. ``SKIP`` means the case does not apply here
    (e.g. a CUDA-only kernel on a CPU machine), or a command said so (exit 125). ``CRASH`` and
    ``TIMEOUT`` are set by the worker, never by a probe: the worker process (or a command) died
    during the case, the probe tried to end the worker (``sys.exit``, ``KeyboardInterrupt``), or
    the case ran past its time limit.
    """

    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"
    SKIP = "skip"
    CRASH = "crash"
    TIMEOUT = "timeout"


BAD_OUTCOMES = frozenset({Outcome.FAIL, Outcome.CRASH, Outcome.TIMEOUT})
WORKER_DEATHS = frozenset({Outcome.CRASH, Outcome.TIMEOUT})
"""The outcomes the worker sets when a case dies: not a probe's judgement, so not repeated by rule."""


class Verdict(str, enum.Enum):
    """``SKIP`` is git bisect's exit 125: the revision cannot be judged (its code does not import,
    or no case applies here). A crash or a hang is a misbehaving revision, so it is ``BAD``."""

    GOOD = "good"
    BAD = "bad"
    SKIP = "skip"

    @property
    def exit_code(self) -> int:
        """``git bisect run``'s convention."""
        return {Verdict.GOOD: 0, Verdict.BAD: 1, Verdict.SKIP: 125}[self]


def reason_of(outcome: Outcome, signature: str | None, detail: str | None) -> str | None:
    """Why a run did not pass: its signature, else the first line of its detail (a probe may say why
    it skipped only there); None for a pass without a signature, whose detail is mere output."""
    if signature:
        return signature
    lines = (detail or "").strip().splitlines()
    return lines[0] if lines and outcome is not Outcome.PASS else None


def verdict_of(outcomes: Iterable[Outcome]) -> Verdict:
    """Any bad case makes the revision bad; otherwise any error, or nothing that ran, makes it untestable."""
    seen = set(outcomes)
    if seen & BAD_OUTCOMES:
        return Verdict.BAD
    if Outcome.ERROR in seen or Outcome.PASS not in seen:
        return Verdict.SKIP
    return Verdict.GOOD


@dataclass(frozen=True)
class FlakeEstimate:
    """A probe's observed flake rate: the share of judged runs that disagree with their tree's
    majority, over ``runs`` judged runs of trees measured at least twice."""

    rate: float
    runs: int


def flake_estimate(attempts_by_tree: Iterable[Sequence[Verdict]]) -> FlakeEstimate | None:
    """None when no tree has two judged attempts: one run per tree cannot show a flake.

    The minority count of a tree is what flakiness must explain at the least (a tree with 2
    fails in 6 runs flaked at least twice), so the rate is a lower bound on how often a run lies.
    """
    minority = runs = 0
    for attempts in attempts_by_tree:
        judged = [v for v in attempts if v is not Verdict.SKIP]
        if len(judged) < 2:
            continue
        fails = sum(v is Verdict.BAD for v in judged)
        minority += min(fails, len(judged) - fails)
        runs += len(judged)
    return FlakeEstimate(minority / runs, runs) if runs else None


class State(str, enum.Enum):
    """A commit's state along a line, over all its stored attempts: judged attempts that disagree make it flaky."""

    GOOD = "good"
    BAD = "bad"
    SKIP = "skip"
    FLAKY = "flaky"


def state_of(verdicts: Iterable[Verdict]) -> State:
    """A tree's state from the verdicts of its attempts."""
    judged = {v for v in verdicts if v is not Verdict.SKIP}
    if len(judged) > 1:
        return State.FLAKY
    if not judged:
        return State.SKIP
    return State.GOOD if judged == {Verdict.GOOD} else State.BAD
