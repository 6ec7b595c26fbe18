"""What the HTML report shows, as plain immutable data: no git, database or torch.

The store fills a ``ReportData`` (commits of the first-parent line, each probe's cell at each
commit, the transitions with their revert and re-land pairs, the untestable and flaky stretches,
the bisect sessions and the environments); ``tracker.report.html`` renders it. Every string here
may come from a repository or the database and is escaped by the renderer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Literal

CellState = Literal["pass", "fail", "skip", "flaky", "untested"]
TransitionKind = Literal["regression", "fix"]
PairKind = Literal["reverts", "relands"]
StretchKind = Literal["untestable", "flaky"]
StepVerdict = Literal["good", "bad", "skip"]


@dataclass(frozen=True)
class ReportCommit:
    sha: str
    subject: str
    pr_number: int | None
    author: str
    authored_at: datetime


@dataclass(frozen=True)
class Cell:
    """One probe at one commit; ``runs`` counts the stored executions behind the state."""

    state: CellState
    signature: str | None = None
    runs: int = 0


UNTESTED = Cell("untested")


@dataclass(frozen=True)
class ReportTransition:
    """``sha`` is the first commit in the new state; ``candidates`` lists every commit that may be
    the transition when untestable or flaky commits hide it (empty when ``sha`` is exact)."""

    probe: str
    sha: str
    kind: TransitionKind
    pairs_with: str | None
    pair_kind: PairKind | None
    candidates: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReportStretch:
    probe: str
    kind: StretchKind
    first: str
    last: str


@dataclass(frozen=True)
class ReportBisectStep:
    sha: str
    verdict: StepVerdict
    reused: bool


@dataclass(frozen=True)
class ReportBisect:
    session_id: int
    probe: str
    good: str
    bad: str
    status: str
    culprit: str | None
    candidates: tuple[str, ...]
    steps: tuple[ReportBisectStep, ...]
    strategy: str | None = None
    confidence: float | None = None  # the answer's probability; 1.0 from a search that trusts every run
    find_fix: bool = False  # the search ran from ``bad`` (older) to ``good``: its culprit is the first fixed commit


@dataclass(frozen=True)
class ReportEnvironment:
    fingerprint: str
    device: str | None = None
    gpu_name: str | None = None
    compute_capability: str | None = None
    driver: str | None = None
    cuda: str | None = None
    torch: str | None = None
    flashinfer: str | None = None
    python: str | None = None
    host: str | None = None
    facts: tuple[tuple[str, str], ...] = ()  # what the target declares about its environment, sorted


@dataclass(frozen=True)
class ReportData:
    """``commits`` is the first-parent line, oldest first; ``cells`` maps (sha, probe) to a cell,
    and a missing key is an untested cell."""

    repository: str
    generated_at: datetime
    probes: tuple[str, ...]
    commits: tuple[ReportCommit, ...]
    cells: Mapping[tuple[str, str], Cell] = field(default_factory=dict)
    transitions: tuple[ReportTransition, ...] = ()
    stretches: tuple[ReportStretch, ...] = ()
    bisects: tuple[ReportBisect, ...] = ()
    environments: tuple[ReportEnvironment, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "cells", MappingProxyType(dict(self.cells)))

    def cell(self, sha: str, probe: str) -> Cell:
        return self.cells.get((sha, probe), UNTESTED)
