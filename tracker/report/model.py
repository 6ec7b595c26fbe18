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
from tracker.core.verification import Verification

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
    verification: Verification | None = None
    """The culprit's check, as the session stored it; None where it has none."""


@dataclass(frozen=True)
class SeriesPoint:
    """One value of a series at one commit of the line; ``measured`` is False where the value is the
    stored result of the same tree measured at another commit (reused)."""

    sha: str
    value: float
    measured: bool


@dataclass(frozen=True)
class Series:
    """One stored metric of one probe case along the first-parent line, in one environment and dtype:
    ``metric`` is a metric the probe stored, or ``duration_s``; ``tolerance`` the limit the probe
    judged it against, where it stored one. Points are oldest first."""

    probe: str
    case: str
    metric: str
    environment: str
    """The environment's fingerprint (``EnvironmentInfo.fingerprint``)."""
    device: str
    """What a reader calls the environment: ``cpu``, or the GPU's name."""
    dtype: str | None
    tolerance: float | None
    points: tuple[SeriesPoint, ...]


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
    series: tuple[Series, ...] = ()
    measured: frozenset[str] | None = None
    """The commits a stored run was executed at; None where that is not known, and every commit of
    the line then gets a timeline row of its own."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "cells", MappingProxyType(dict(self.cells)))

    def cell(self, sha: str, probe: str) -> Cell:
        return self.cells.get((sha, probe), UNTESTED)
