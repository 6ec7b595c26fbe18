"""What a scan and the scheduled job return: the records the CLI prints and ``tracker.report.ci`` writes."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from tracker.core.exits import ExitStatus, exit_status
from tracker.core.measurements import Measurement
from tracker.core.records import CommitInfo, StretchRecord, TransitionRecord
from tracker.core.verdicts import State, Verdict
from tracker.core.verification import Verification


@dataclass(frozen=True)
class ChangePoint:
    """A step in one case's series of one metric: at ``sha`` (the first measured revision of the
    new level) since ``previous`` (the last one of the old), ``way`` "slower" or "faster", the
    change from ``previous``'s executions to ``sha``'s (+0.12: 12 % slower) with its interval, and
    how many executions each of the two held."""

    probe: str
    metric: str
    case: str
    sha: str
    previous: str
    way: str
    change: float
    low: float
    high: float
    before: int
    after: int


@dataclass(frozen=True)
class SeriesNoise:
    """How much one case's series of one metric moves between neighbouring revisions with no step:
    sigma as a fraction, from ``points`` measured revisions."""

    probe: str
    metric: str
    case: str
    noise: float
    points: int


@dataclass
class ProbeScan:
    probe: str
    states: list[State | None]
    transitions: list[TransitionRecord] = field(default_factory=list)
    stretches: list[StretchRecord] = field(default_factory=list)
    changes: list[ChangePoint] = field(default_factory=list)
    """A metric probe's steps, each confirmed by the rank test (``tracker.perf.changepoints``)."""
    noise: list[SeriesNoise] = field(default_factory=list)


@dataclass
class ScanReport:
    line: list[CommitInfo]
    probes: list[ProbeScan]
    executions: int = 0
    reused: int = 0
    verifications: list[Verification] = field(default_factory=list)
    """Each regression's culprit checked (``scan --verify``), in the order of ``transitions``."""

    @property
    def transitions(self) -> list[TransitionRecord]:
        return [t for scan in self.probes for t in scan.transitions]

    @property
    def exit_status(self) -> ExitStatus:
        """BAD if a probe fails at the range's last commit; else UNJUDGED if no probe could judge any
        commit of the range; else OK."""
        if any(scan.states and scan.states[-1] is State.BAD for scan in self.probes):
            return ExitStatus.BAD
        if not any(state not in (None, State.SKIP) for scan in self.probes for state in scan.states):
            return ExitStatus.UNJUDGED
        return ExitStatus.OK

    @cached_property
    def commits(self) -> dict[str, CommitInfo]:
        """The line's commits by sha."""
        return {c.sha: c for c in self.line}


@dataclass(frozen=True)
class NewRegression:
    transition: TransitionRecord
    commit: CommitInfo
    measurement: Measurement
    parent: str
    verification: Verification | None = None
    """The culprit checked against the last commit it failed at before the next transition."""


@dataclass(frozen=True)
class HeadVerdict:
    """A probe at the tracked head: its state over the head tree's stored attempts, its latest
    measurement, and the regression it has failed since (None when it passes, or when no
    regression before the head is known: it failed already at ``first``, the oldest commit the
    job looked at)."""

    probe: str
    state: State
    measurement: Measurement
    first: str
    culprit: CommitInfo | None = None

    @property
    def failing(self) -> bool:
        """A flaky head fails some of its runs: for a gate, as failing as a bad one."""
        return self.state in (State.BAD, State.FLAKY)

    @property
    def verdict(self) -> Verdict:
        if self.failing:
            return Verdict.BAD
        return Verdict.GOOD if self.state is State.GOOD else Verdict.SKIP

    @property
    def failing_since(self) -> str:
        """The JUnit message: since the culprit, or since ``first`` or earlier when none is known."""
        if self.culprit is not None:
            return f"failing since {self.culprit.sha[:12]}"
        return f"failing since {self.first[:12]} or earlier"


@dataclass
class TrackResult:
    target: str
    branch: str
    head: str
    since: str | None
    commits: int
    scan: ScanReport | None = None
    new_regressions: list[NewRegression] = field(default_factory=list)
    new_transitions: list[TransitionRecord] = field(default_factory=list)
    at_head: list[HeadVerdict] = field(default_factory=list)
    reports: list[Path] = field(default_factory=list)
    """The JUnit XML, markdown and JSON files written from the result (``tracker.report.ci``)."""

    @property
    def exit_status(self) -> ExitStatus:
        return exit_status({self.head: [h.verdict for h in self.at_head]})
