"""What a bisect session is asked and what it answers: its options as stored for ``--resume``, and
the report.

Direction. A bisect looks for the first bad commit after a good one; with ``find_fix`` it looks
for the first good commit after a bad one. The strategies only know the first kind, so a fix
search feeds them every verdict inverted (``searched``): the old end, which fails, is the
strategy's good end, and the first commit that passes is the strategy's first "bad" one. Steps
are stored and reported as measured; the direction is stored with the options, so a resumed
session inverts the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from tracker.core.errors import UsageError
from tracker.core.exits import ExitStatus
from tracker.core.measurements import Measurement
from tracker.core.records import CommitInfo, SessionRow
from tracker.core.verdicts import Verdict
from tracker.core.verification import Verification
from tracker.search.strategies import StrategyName


@dataclass(frozen=True)
class BisectOptions:
    """How to search: ``workers`` revisions are measured side by side in each round; ``max_runs``
    bounds the executions of the session (None: no bound); ``find_fix`` looks for the first
    commit that passes after one that fails; ``assume_ends`` takes the ends at the user's word,
    as ``git bisect`` does, instead of measuring them first."""

    strategy: StrategyName = "auto"
    workers: int = 1
    confidence: float = 0.95
    max_runs: int | None = None
    find_fix: bool = False
    assume_ends: bool = False


def searched(verdict: Verdict, find_fix: bool) -> Verdict:
    """The verdict as the strategy is fed it: a fix search swaps good and bad; untestable stays."""
    if not find_fix or verdict is Verdict.SKIP:
        return verdict
    return Verdict.BAD if verdict is Verdict.GOOD else Verdict.GOOD


def found_label(find_fix: bool) -> str:
    return "first fixed commit" if find_fix else "first bad commit"


@dataclass(frozen=True)
class FlakePrior:
    """The probe's flake rate read from history when the session started, and its weight in pseudo-runs."""

    rate: float
    runs: float


@dataclass(frozen=True)
class StoredOptions:
    """What a session stores to be resumed as the same search."""

    search: BisectOptions
    execution: Mapping[str, Any]
    prior: FlakePrior | None

    def to_json(self) -> dict[str, Any]:
        prior = asdict(self.prior) if self.prior else None
        return {"search": asdict(self.search), "execution": dict(self.execution), "prior": prior}

    @classmethod
    def of(cls, session: SessionRow) -> StoredOptions:
        if not session.options:
            raise UsageError(
                f"bisect session {session.id} was started by an older regtrack that did not store its options; "
                "start a new bisect with --good and --bad"
            )
        prior = session.options.get("prior")
        search = BisectOptions(**session.options["search"])
        return cls(search, session.options["execution"], FlakePrior(**prior) if prior else None)


@dataclass(frozen=True)
class Step:
    """One verdict of the session, as measured (not as the strategy was fed it)."""

    sha: str
    verdict: Verdict
    reused: bool


@dataclass
class BisectReport:
    """``good`` is the end that passes and ``bad`` the end that fails, in either direction;
    ``culprit`` is the commit the search names: the first bad one, or with ``find_fix`` the
    first fixed one. The failure rates are of real failures, in either direction. ``session_id``
    is None for an answer from stored results alone (``Bisection.answer``): nothing ran, and no
    session was recorded."""

    session_id: int | None
    probe: str
    good: str
    bad: str
    strategy: str
    culprit: CommitInfo | None
    candidates: list[CommitInfo]
    confidence: float = 1.0
    no_culprit: bool = False
    fail_rate_before: float | None = None
    fail_rate_after: float | None = None
    switch_reason: str | None = None
    flake_rate_prior: float | None = None
    culprit_measurement: Measurement | None = None
    parent_measurement: Measurement | None = None
    steps: list[Step] = field(default_factory=list)
    executions: int = 0
    """Every probe execution of the bisect: its ends, its search and the culprit's check."""
    check_executions: int = 0
    """Of ``executions``, those of the culprit's check (``tracker.verify``): 1, or 0 where its tree was stored."""
    reused: int = 0  # steps answered from stored results
    rounds: int = 0
    find_fix: bool = False
    verification: Verification | None = None
    """The culprit checked: the bad end measured with its change undone (None without a culprit)."""

    @property
    def exit_status(self) -> ExitStatus:
        """BAD when the search names a commit (or the candidates that hide it), else OK."""
        return ExitStatus.BAD if self.culprit or self.candidates else ExitStatus.OK

    @property
    def found(self) -> str:
        """What the culprit is: "first bad commit" or "first fixed commit"."""
        return found_label(self.find_fix)

    def to_json(self) -> dict[str, object]:
        def measured(m: Measurement | None) -> dict[str, object] | None:
            if m is None:
                return None
            return {"sha": m.sha, "verdict": m.verdict.value, "signature": m.signature, "metrics": m.metrics}

        return {
            "session": self.session_id,
            "probe": self.probe,
            "good": self.good,
            "bad": self.bad,
            "find_fix": self.find_fix,
            "found": self.found,
            "strategy": self.strategy,
            "culprit": self.culprit.sha if self.culprit else None,
            "subject": self.culprit.subject if self.culprit else None,
            "pr_number": self.culprit.pr_number if self.culprit else None,
            "candidates": [c.sha for c in self.candidates],
            "confidence": self.confidence,
            "no_culprit": self.no_culprit,
            "fail_rate_before": self.fail_rate_before,
            "fail_rate_after": self.fail_rate_after,
            "switch_reason": self.switch_reason,
            "flake_rate_prior": self.flake_rate_prior,
            "culprit_result": measured(self.culprit_measurement),
            "parent_result": measured(self.parent_measurement),
            "steps": [{**asdict(s), "verdict": s.verdict.value} for s in self.steps],
            "executions": self.executions,
            "check_executions": self.check_executions,
            "reused": self.reused,
            "rounds": self.rounds,
            "verification": self.verification.to_json() if self.verification else None,
        }
