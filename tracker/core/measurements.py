"""What measuring one revision with one probe says: each case's outcome, and the revision's verdict."""

from __future__ import annotations

from dataclasses import dataclass

from tracker.core.records import StoredRun
from tracker.core.verdicts import Outcome, Verdict, reason_of

TOLERANCE_SUFFIX = "_tol"
"""A metric named ``<metric>_tol`` is the limit ``<metric>`` was judged against, not a measurement."""
DURATION = "duration_s"
"""What a case's wall time is called beside the metrics its probe stored."""


@dataclass(frozen=True)
class CaseOutcome:
    """One case of a probe at one revision."""

    case_id: str
    outcome: Outcome
    signature: str | None
    """Why the case did not pass (``tracker.core.verdicts.reason_of``): a probe may say it only in its detail."""
    metrics: dict[str, float]
    duration_s: float | None = None
    """The wall time of the run, as stored."""

    @classmethod
    def of(cls, run: StoredRun) -> CaseOutcome:
        reason = reason_of(run.outcome, run.signature, run.detail)
        return cls(run.case_id, run.outcome, reason, dict(run.metrics), run.duration_s)


@dataclass(frozen=True)
class Measurement:
    """A probe at one revision: ``reused`` when the result was stored already, ``attempt`` the stored
    attempt it reports."""

    sha: str
    tree_hash: str
    verdict: Verdict
    cases: tuple[CaseOutcome, ...]
    reused: bool
    attempt: int = 1

    @property
    def signature(self) -> str | None:
        """The failing cases' signatures, or the untestable and skipped ones' when nothing failed."""
        wanted = {
            Verdict.BAD: {Outcome.FAIL, Outcome.CRASH, Outcome.TIMEOUT},
            Verdict.SKIP: {Outcome.ERROR, Outcome.SKIP},
        }
        found = [c.signature for c in self.cases if c.outcome in wanted.get(self.verdict, set()) and c.signature]
        return "; ".join(dict.fromkeys(found)) or None

    @property
    def metrics(self) -> dict[str, float]:
        """The worst value of each metric over the cases."""
        worst: dict[str, float] = {}
        for case in self.cases:
            for key, value in case.metrics.items():
                worst[key] = max(worst.get(key, value), value)
        return worst
