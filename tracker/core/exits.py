"""The exit codes of regtrack, and the rule that turns the verdicts of the commits asked about
into one.

0: every commit asked about was judged and none is bad; 1: one is bad (a probe failed, or a bisect
named a commit); 2: bad usage or input; 3: nothing is bad, but a commit asked about could not be
judged by any of its probes (every verdict untestable): a green gate would be a lie, a red one
would blame the code. A bad verdict wins over an unjudged commit.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping

from tracker.core.verdicts import Verdict


class ExitStatus(enum.IntEnum):
    OK = 0
    BAD = 1
    USAGE = 2
    UNJUDGED = 3
    INTERRUPTED = 130
    """Ctrl-C, as a shell reports a command that SIGINT ended."""


def exit_status(verdicts_by_commit: Mapping[str, Iterable[Verdict]]) -> ExitStatus:
    """BAD if any verdict is bad; else UNJUDGED if some commit has no judged verdict; else OK."""
    by_commit = {sha: set(verdicts) for sha, verdicts in verdicts_by_commit.items()}
    if any(Verdict.BAD in verdicts for verdicts in by_commit.values()):
        return ExitStatus.BAD
    if any(not verdicts - {Verdict.SKIP} for verdicts in by_commit.values()):
        return ExitStatus.UNJUDGED
    return ExitStatus.OK
