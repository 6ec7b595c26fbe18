"""What the HTML report shows, as plain immutable data: no git, database or torch.

The store fills a ``ReportData`` with core's records (the commits of the first-parent line, the
transitions with their revert and re-land pairs, the untestable and flaky stretches, the
environments), each probe's cell at each commit, and the bisect sessions; ``tracker.report.html``
renders it. Every string here may come from a repository or the database and is escaped by the
renderer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Literal

from tracker.core.records import CommitInfo, EnvironmentInfo, StepRow, StretchRecord, TransitionRecord

CellState = Literal["pass", "fail", "skip", "flaky", "untested"]


@dataclass(frozen=True)
class Cell:
    """One probe at one commit; ``runs`` counts the stored executions behind the state."""

    state: CellState
    signature: str | None = None
    runs: int = 0


UNTESTED = Cell("untested")


@dataclass(frozen=True)
class ReportBisect:
    """A bisect session as the report shows it: its stored result read into culprit, candidates,
    confidence and direction, with its steps."""

    session_id: int
    probe: str
    good: str
    bad: str
    status: str
    culprit: str | None
    candidates: tuple[str, ...]
    steps: tuple[StepRow, ...]
    strategy: str | None = None
    confidence: float | None = None
    """The answer's probability; 1.0 from a search that trusts every run."""
    find_fix: bool = False
    """The search ran from ``bad`` (older) to ``good``: its culprit is the first fixed commit."""


@dataclass(frozen=True)
class ReportData:
    """``commits`` is the first-parent line, oldest first; ``cells`` maps (sha, probe) to a cell,
    and a missing key is an untested cell."""

    repository: str
    generated_at: datetime
    probes: tuple[str, ...]
    commits: tuple[CommitInfo, ...]
    cells: Mapping[tuple[str, str], Cell] = field(default_factory=dict)
    transitions: tuple[TransitionRecord, ...] = ()
    stretches: tuple[StretchRecord, ...] = ()
    bisects: tuple[ReportBisect, ...] = ()
    environments: tuple[EnvironmentInfo, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "cells", MappingProxyType(dict(self.cells)))

    def cell(self, sha: str, probe: str) -> Cell:
        return self.cells.get((sha, probe), UNTESTED)
