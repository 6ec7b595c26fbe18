"""The Python API of the commands that run probes: ``measure_revisions`` (``regtrack run``),
``bisect``, ``scan`` and ``track``. Each opens the workspace, measures (stored results first),
stores what it finds and returns a typed report; a ``Watch`` hears how it goes."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

from db.paths import data_dir
from probes.api import Probe
from tracker.bisect_options import Step
from tracker.bisect_session import StepProgress
from tracker.core.errors import UsageError
from tracker.core.exits import ExitStatus, exit_status
from tracker.core.measurements import Measurement
from tracker.core.records import CommitInfo
from tracker.core.results import ScanReport, TrackResult
from tracker.core.verdicts import Outcome, Verdict
from tracker.execution.executors import EnvironmentRefuted, Executor
from tracker.issue_report import issues_of
from tracker.measure import Prober
from tracker.report.ci import write_reports
from tracker.scan import CONFIRM_RUNS, MAX_SAMPLES, Scanner, ScanStep, history_cut_warning
from tracker.track import record_scan, run_track, track_lock
from tracker.verify import check_regressions
from tracker.workspace import ExecutionOptions, Workspace

T = TypeVar("T")


@dataclass(frozen=True)
class Selection:
    """What a probing function works on: ``repo`` (default: the repository around the current
    directory), ``target`` (default: the config's only one), and the probes: ``probes`` by name
    (default: the target's) or ``command``, a command line probed as ``git bisect run`` runs it.
    ``fresh`` measures again where a stored result would stand."""

    repo: Path | None = None
    target: str | None = None
    probes: tuple[str, ...] = ()
    command: str | None = None
    fresh: bool = False


@dataclass(frozen=True)
class MeasuredRow:
    """One probe at one commit, as ``regtrack run`` lists it."""

    sha: str
    subject: str
    probe: str
    verdict: Verdict
    signature: str | None
    metrics: dict[str, float]
    reused: bool
    cases: dict[str, Outcome]

    @classmethod
    def of(cls, commit: CommitInfo | None, probe: str, m: Measurement) -> MeasuredRow:
        cases = {c.case_id: c.outcome for c in m.cases}
        subject = commit.subject if commit else ""
        return cls(m.sha, subject, probe, m.verdict, m.signature, m.metrics, m.reused, cases)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["verdict"] = self.verdict.value
        data["cases"] = {case: outcome.value for case, outcome in self.cases.items()}
        return data


@dataclass(frozen=True)
class RunStep:
    """Row ``number`` of ``total`` measured, in ``seconds`` (about 0 for a stored result)."""

    row: MeasuredRow
    number: int
    total: int
    seconds: float


@dataclass(frozen=True)
class RunReport:
    """Each probe at each commit asked about."""

    rows: list[MeasuredRow]

    @property
    def exit_status(self) -> ExitStatus:
        verdicts: dict[str, list[Verdict]] = {}
        for row in self.rows:
            verdicts.setdefault(row.sha, []).append(row.verdict)
        return exit_status(verdicts)

    def to_json(self) -> list[dict[str, Any]]:
        return [row.to_json() for row in self.rows]


class Watch:
    """What a probing function tells as it goes; this one listens to nothing. Override what you
    want to hear."""

    def started(self, title: str) -> None:
        """The work is under way: "run", "scan", "track" or "bisect <probe>"."""

    def notice(self, message: str) -> None:
        """Something to know that is no error (a history cut short, a measurement started again)."""

    def measuring(self, probe: str, sha: str) -> None:
        """``measure_revisions`` starts measuring ``probe`` at ``sha``."""

    def measured(self, step: RunStep) -> None:
        """``measure_revisions`` measured one row."""

    def bisected(self, step: Step, measurement: Measurement, progress: StepProgress, subject: str) -> None:
        """``bisect`` fed one verdict to its search; ``subject`` is the commit's."""

    def scanned(self, step: ScanStep, subject: str) -> None:
        """``scan`` or ``track`` measured one revision; ``subject`` is the commit's."""


QUIET = Watch()
# Frozen: one shared instance serves every call as a default.
DEFAULT_EXECUTION = ExecutionOptions()


def measure_revisions(
    selection: Selection, revs: Sequence[str], options: ExecutionOptions = DEFAULT_EXECUTION, watch: Watch = QUIET
) -> RunReport:
    """Each probe at each of ``revs``, stored results reused."""
    with Workspace.open(selection.repo, selection.target) as opened:
        shas = [opened.repo.resolve(rev) for rev in revs]
        ws, probes = probes_of(opened, selection)
        watch.started("run")

        def rows(executor: Executor) -> RunReport:
            probers = [Prober.open(ws, p, executor, "run", options.seed, selection.fresh) for p in probes]
            return _rows(ws, probers, shas, watch)

        return measured_with(ws, options, watch, rows)


def _rows(ws: Workspace, probers: list[Prober], shas: list[str], watch: Watch) -> RunReport:
    return RunReport([row for row, _ in measure_each(ws, probers, shas, watch)])


def measure_each(
    ws: Workspace, probers: list[Prober], shas: list[str], watch: Watch
) -> list[tuple[MeasuredRow, Measurement]]:
    """Each prober at each of ``shas`` (stored results first), probe by probe, each row told to ``watch``."""
    measured: list[tuple[MeasuredRow, Measurement]] = []
    total = len(shas) * len(probers)
    for prober in probers:
        probe = prober.probe
        trees = prober.record_commits(shas)
        for sha in shas:
            watch.measuring(probe.name, sha)
            started = time.perf_counter()
            measurement = prober.measure(sha, trees[sha])
            row = MeasuredRow.of(ws.store.commit(prober.repo_id, sha), probe.name, measurement)
            measured.append((row, measurement))
            watch.measured(RunStep(row, len(measured), total, time.perf_counter() - started))
    return measured


def scan_steps(ws: Workspace, repo_id: int, watch: Watch) -> Callable[[ScanStep], None]:
    """A scan's steps told to ``watch``, each with its commit's subject."""
    subject = subjects(ws, repo_id)

    def told(step: ScanStep) -> None:
        watch.scanned(step, subject(step.sha))

    return told


def scan(
    selection: Selection,
    range_spec: str = "HEAD",
    max_samples: int = MAX_SAMPLES,
    confirm: int = CONFIRM_RUNS,
    options: ExecutionOptions = DEFAULT_EXECUTION,
    watch: Watch = QUIET,
    verify: bool = False,
) -> ScanReport:
    """Every transition of each probe along ``range_spec`` (``A..B``, or ``B`` for its whole
    first-parent line), recorded in the store; with ``verify``, each regression's culprit checked
    against the last commit it failed at (``tracker.verify``)."""
    with Workspace.open(selection.repo, selection.target) as opened:
        line = opened.repo.line(range_spec)
        if warning := history_cut_warning(opened.repo, line):
            watch.notice(f"warning: {warning}")
        ws, probes = probes_of(opened, selection)
        watch.started("scan")

        def scanned(executor: Executor) -> ScanReport:
            probers = [Prober.open(ws, p, executor, "scan", options.seed, selection.fresh) for p in probes]
            steps = scan_steps(ws, probers[0].repo_id, watch)
            report = Scanner(ws.repo, probers, max_samples, confirm, progress=steps).scan(line)
            record_scan(ws, probers[0].repo_id, report)
            if verify:
                check_regressions(report, {p.probe.name: p for p in probers}, watch.measuring)
            return report

        return measured_with(ws, options, watch, scanned)


def track(
    selection: Selection,
    branch: str | None = None,
    out_dir: Path | None = None,
    wait: bool = False,
    options: ExecutionOptions = DEFAULT_EXECUTION,
    watch: Watch = QUIET,
    verify: bool = True,
) -> TrackResult:
    """The scheduled job over ``branch`` (default: the target's): the commits new since the last
    job probed, their transitions recorded, the head judged, and the CI reports written to
    ``out_dir`` (default: the data directory's ``reports/<target>``); with ``verify``, each new
    regression's culprit checked. One job at a time per target: another one waits with ``wait``,
    else is a usage error."""
    with Workspace.open(selection.repo, selection.target) as opened:
        ws, probes = probes_of(opened, selection)
        watch.started("track")

        def tracked(executor: Executor) -> TrackResult:
            probers = [Prober.open(ws, p, executor, "track", options.seed, selection.fresh) for p in probes]
            steps = scan_steps(ws, probers[0].repo_id, watch)
            return run_track(ws, branch or ws.target.branch, probers, steps, verify)

        with track_lock(ws.store, ws.repo.path, ws.target.name, wait):
            result = measured_with(ws, options, watch, tracked)
        issues = issues_of(ws, [r.transition for r in result.new_regressions], probes)
        reports_dir = out_dir or data_dir() / "reports" / ws.target.name
        result.reports = write_reports(result, reports_dir, ws.repo.path, issues)
    return result


def probes_of(ws: Workspace, selection: Selection) -> tuple[Workspace, list[Probe]]:
    """The named probes (default: the target's), or ``command``'s with the workspace it measures in."""
    if selection.command is None:
        return ws, ws.probes(selection.probes)
    if selection.probes:
        raise UsageError("give --probe or --command, not both")
    whole, probe = ws.command_probe(selection.command)
    return whole, [probe]


def measured_with(ws: Workspace, options: ExecutionOptions, watch: Watch, measure: Callable[[Executor], T]) -> T:
    """``measure`` with an executor that takes a local GPU's stack from nvidia-smi, so that a
    command that finds every result stored starts no worker. Where the first worker to start words
    the GPU otherwise, nothing has run yet and what was looked up was looked up under nvidia-smi's
    words: ``measure`` again, with an executor whose workers tell every stack."""
    try:
        with options.executor(ws.config.executor, gpu_told_by_nvidia_smi=True) as executor:
            return measure(executor)
    except EnvironmentRefuted as refuted:
        watch.notice(f"{refuted}; measuring again with the workers' description")
        with options.executor(ws.config.executor) as executor:
            return measure(executor)


def subjects(ws: Workspace, repo_id: int) -> Callable[[str], str]:
    """A commit's subject, from the commits the command recorded."""

    def subject(sha: str) -> str:
        commit = ws.store.commit(repo_id, sha)
        return commit.subject if commit else ""

    return subject
