"""Whether a named culprit explains the failure: the bad end measured with the culprit's change undone.

A bisect (or a scan) names commit C as the first bad commit before the bad end B. regtrack then
measures B with C reverted, a tree it writes without touching the user's checkout. If B passes
without C, the culprit is confirmed; if B still fails, something else breaks it too (a later
commit, or a misled search) and the answer says which runs would tell. Where C cannot be reverted
cleanly on B, C itself is what was checked, and the answer says so.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from tracker.core.verdicts import Verdict


class VerificationStatus(enum.StrEnum):
    CONFIRMED = "confirmed"
    """B passes with C reverted: C's change is what breaks it."""
    NOT_CONFIRMED = "not confirmed"
    """B still fails with C reverted: a later commit breaks it too, or the search was misled."""
    DOES_NOT_APPLY = "does not apply"
    """C cannot be reverted cleanly on B; C on its parent is what was checked."""
    UNTESTABLE = "untestable"
    """B with C reverted could not be judged by the probe (it does not build or import, say)."""
    SKIPPED = "skipped"
    """Not asked for (``--no-verify``)."""


@dataclass(frozen=True)
class Verification:
    """The check of one culprit for one probe.

    ``checked`` is the revision measured: the commit regtrack wrote for B with C reverted, or C
    itself where the revert does not apply (None when skipped); ``verdict`` is the probe's verdict
    there. ``undoes`` is the fix that C reverted, for a bug that C re-introduces; ``conflicts``
    the paths where the revert does not apply; ``next_steps`` the commands whose runs would tell
    what the check could not."""

    status: VerificationStatus
    probe: str
    culprit: str
    bad: str
    explanation: str
    checked: str | None = None
    verdict: Verdict | None = None
    reused: bool = False
    undoes: str | None = None
    conflicts: tuple[str, ...] = ()
    next_steps: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "probe": self.probe,
            "culprit": self.culprit,
            "bad": self.bad,
            "explanation": self.explanation,
            "checked": self.checked,
            "verdict": self.verdict.value if self.verdict is not None else None,
            "reused": self.reused,
            "undoes": self.undoes,
            "conflicts": list(self.conflicts),
            "next_steps": list(self.next_steps),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Verification:
        verdict = data.get("verdict")
        return cls(
            status=VerificationStatus(data["status"]),
            probe=data["probe"],
            culprit=data["culprit"],
            bad=data["bad"],
            explanation=data["explanation"],
            checked=data.get("checked"),
            verdict=Verdict(verdict) if verdict is not None else None,
            reused=bool(data.get("reused", False)),
            undoes=data.get("undoes"),
            conflicts=tuple(data.get("conflicts", ())),
            next_steps=tuple(data.get("next_steps", ())),
        )
