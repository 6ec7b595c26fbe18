"""From probe outcomes to what a bisect needs to know about a revision."""

from __future__ import annotations

import enum
from collections.abc import Iterable

from probes.api import Outcome

BAD_OUTCOMES = frozenset({Outcome.FAIL, Outcome.CRASH, Outcome.TIMEOUT})


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


def verdict_of(outcomes: Iterable[Outcome]) -> Verdict:
    """Any bad case makes the revision bad; otherwise any error, or nothing that ran, makes it untestable."""
    seen = set(outcomes)
    if seen & BAD_OUTCOMES:
        return Verdict.BAD
    if Outcome.ERROR in seen or Outcome.PASS not in seen:
        return Verdict.SKIP
    return Verdict.GOOD
