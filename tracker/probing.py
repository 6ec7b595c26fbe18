"""The Python API of the commands that run probes: ``measure_revisions`` (``regtrack run``),
``bisect``, ``scan`` and ``track``. Each opens the workspace, measures (stored results first),
stores what it finds and returns a typed report; a ``Watch`` hears how it goes."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

from db.errors import NotStored
from db.paths import data_dir
from probes.api import Probe
from tracker.bisect_options import BisectOptions, BisectReport, Step, StoredOptions
from tracker.bisect_session import Bisection, StepCallback, StepProgress, take_session
from tracker.core.errors import UsageError
from tracker.core.exits import ExitStatus, exit_status
from tracker.core.measurements import Measurement
from tracker.core.records import CommitInfo, SessionRow
from tracker.core.results import ScanReport, TrackResult
from tracker.core.verdicts import Outcome, Verdict
from tracker.execution.executors import EnvironmentRefuted, Executor
from tracker.measure import Prober
from tracker.report.ci import write_reports
from tracker.scan import CONFIRM_RUNS, MAX_SAMPLES, Scanner, ScanStep, history_cut_warning
from tracker.stored_bisect import answer_from_store
from tracker.track import record_scan, run_track, track_lock
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
# Both frozen: one shared instance serves every call as a default.
DEFAULT_EXECUTION = ExecutionOptions()
DEFAULT_SEARCH = BisectOptions()


def measure_revisions(
    selection: Selection, revs: Sequence[str], options: ExecutionOptions = DEFAULT_EXECUTION, watch: Watch = QUIET
) -> RunReport:
    """Each probe at each of ``revs``, stored results reused."""
    with Workspace.open(selection.repo, selection.target) as opened:
        shas = [opened.repo.resolve(rev) for rev in revs]
        ws, probes = _probes(opened, selection)
        watch.started("run")

        def rows(executor: Executor) -> RunReport:
            probers = [Prober.open(ws, p, executor, "run", options.seed, selection.fresh) for p in probes]
            return _rows(ws, probers, shas, watch)

        return _measured(ws, options, watch, rows)


def _rows(ws: Workspace, probers: list[Prober], shas: list[str], watch: Watch) -> RunReport:
    rows: list[MeasuredRow] = []
    total = len(shas) * len(probers)
    for prober in probers:
        probe = prober.probe
        trees = prober.record_commits(shas)
        for sha in shas:
            watch.measuring(probe.name, sha)
            started = time.perf_counter()
            measurement = prober.measure(sha, trees[sha])
            rows.append(MeasuredRow.of(ws.store.commit(prober.repo_id, sha), probe.name, measurement))
            watch.measured(RunStep(rows[-1], len(rows), total, time.perf_counter() - started))
    return RunReport(rows)


def bisect(
    selection: Selection,
    good: str = "",
    bad: str = "",
    search: BisectOptions = DEFAULT_SEARCH,
    options: ExecutionOptions = DEFAULT_EXECUTION,
    resume: bool = False,
    watch: Watch = QUIET,
) -> BisectReport:
    """The first bad commit after ``good`` up to ``bad`` (first-parent; with ``search.find_fix``
    the first fixed one), answered from stored results alone where they answer it. With
    ``resume``, the newest unfinished bisect of the target and probe, continued with the options
    it was started with."""
    if not resume and not selection.fresh:
        report = _stored_bisect(selection, options, search, good, bad, watch)
        if report is not None:
            return report
    with Workspace.open(selection.repo, selection.target) as opened:
        ws, probe = _bisect_probe(opened, selection)
        pending = _unfinished(ws, probe) if resume else None
        if pending is not None:
            stored = StoredOptions.of(pending)
            options, search = ExecutionOptions(**stored.execution), stored.search
        with options.executor(ws.config.executor) as executor:
            watch.started(f"bisect {probe.name}")
            prober = Prober.open(ws, probe, executor, "bisect", options.seed, selection.fresh)
            steps = _bisect_steps(_subjects(ws, prober.repo_id), watch)
            bisection = Bisection(ws.store, ws.repo, prober, search, steps)
            return bisection.resume(pending) if pending is not None else bisection.start(good, bad, asdict(options))


def _stored_bisect(
    selection: Selection, options: ExecutionOptions, search: BisectOptions, good: str, bad: str, watch: Watch
) -> BisectReport | None:
    """The answer when every result the bisect takes is stored (``tracker.stored_bisect``), its
    steps told then; None where something would have to run."""
    try:
        with Workspace.open_read_only(selection.repo, selection.target) as opened:
            ws, probe = _bisect_probe(opened, selection)
            answer = answer_from_store(ws, probe, options, search, good, bad)
            if answer is None:
                return None
            watch.started(f"bisect {answer.report.probe}")
            steps = _bisect_steps(_subjects(ws, answer.repo_id), watch)
            for step in answer.steps:
                steps(*step)
            return answer.report
    except NotStored:
        return None


def _bisect_probe(ws: Workspace, selection: Selection) -> tuple[Workspace, Probe]:
    if selection.command is None:
        return ws, ws.probe(selection.probes[0] if selection.probes else None)
    whole, probes = _probes(ws, selection)
    return whole, probes[0]


def _unfinished(ws: Workspace, probe: Probe) -> SessionRow:
    """The newest unfinished bisect of the target with ``probe``, now driven by this process alone."""
    probe_id = ws.store.probe_version(probe.name, probe.version, probe.code_hash)
    sessions = ws.store.open_sessions(ws.store.repository(ws.repo.path), ws.target.name, probe_id)
    if not sessions:
        raise UsageError(
            f"no unfinished bisect of probe {probe.name!r} on target {ws.target.name!r}; "
            "start one with --good and --bad"
        )
    take_session(ws.store, sessions[0].id)
    return sessions[0]


def _bisect_steps(subject: Callable[[str], str], watch: Watch) -> StepCallback:
    def told(step: Step, measurement: Measurement, progress: StepProgress) -> None:
        watch.bisected(step, measurement, progress, subject(step.sha))

    return told


def _scan_steps(subject: Callable[[str], str], watch: Watch) -> Callable[[ScanStep], None]:
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
) -> ScanReport:
    """Every transition of each probe along ``range_spec`` (``A..B``, or ``B`` for its whole
    first-parent line), recorded in the store."""
    with Workspace.open(selection.repo, selection.target) as opened:
        line = opened.repo.line(range_spec)
        if warning := history_cut_warning(opened.repo, line):
            watch.notice(f"warning: {warning}")
        ws, probes = _probes(opened, selection)
        watch.started("scan")

        def scanned(executor: Executor) -> ScanReport:
            probers = [Prober.open(ws, p, executor, "scan", options.seed, selection.fresh) for p in probes]
            steps = _scan_steps(_subjects(ws, probers[0].repo_id), watch)
            report = Scanner(ws.repo, probers, max_samples, confirm, progress=steps).scan(line)
            record_scan(ws, probers[0].repo_id, report)
            return report

        return _measured(ws, options, watch, scanned)


def track(
    selection: Selection,
    branch: str | None = None,
    out_dir: Path | None = None,
    wait: bool = False,
    options: ExecutionOptions = DEFAULT_EXECUTION,
    watch: Watch = QUIET,
) -> TrackResult:
    """The scheduled job over ``branch`` (default: the target's): the commits new since the last
    job probed, their transitions recorded, the head judged, and the CI reports written to
    ``out_dir`` (default: the data directory's ``reports/<target>``). One job at a time per
    target: another one waits with ``wait``, else is a usage error."""
    with Workspace.open(selection.repo, selection.target) as opened:
        ws, probes = _probes(opened, selection)
        watch.started("track")

        def tracked(executor: Executor) -> TrackResult:
            probers = [Prober.open(ws, p, executor, "track", options.seed, selection.fresh) for p in probes]
            steps = _scan_steps(_subjects(ws, probers[0].repo_id), watch)
            return run_track(ws, branch or ws.target.branch, probers, steps)

        with track_lock(ws.store, ws.repo.path, ws.target.name, wait):
            result = _measured(ws, options, watch, tracked)
        result.reports = write_reports(result, out_dir or data_dir() / "reports" / ws.target.name, ws.repo.path)
    return result


def _probes(ws: Workspace, selection: Selection) -> tuple[Workspace, list[Probe]]:
    """The named probes (default: the target's), or ``command``'s with the workspace it measures in."""
    if selection.command is None:
        return ws, ws.probes(selection.probes)
    if selection.probes:
        raise UsageError("give --probe or --command, not both")
    whole, probe = ws.command_probe(selection.command)
    return whole, [probe]


def _measured(ws: Workspace, options: ExecutionOptions, watch: Watch, measure: Callable[[Executor], T]) -> T:
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


def _subjects(ws: Workspace, repo_id: int) -> Callable[[str], str]:
    """A commit's subject, from the commits the command recorded."""

    def subject(sha: str) -> str:
        commit = ws.store.commit(repo_id, sha)
        return commit.subject if commit else ""

    return subject
