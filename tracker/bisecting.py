"""The Python API of ``regtrack bisect``: the first bad (or first fixed) commit of a range, answered
from stored results alone where they answer it, else by a bisect session; its culprit checked by
reverting it (``tracker.verify``) and kept with the session."""

from __future__ import annotations

from dataclasses import asdict, replace

from db.errors import NotStored
from probes.api import Probe
from tracker.bisect_options import BisectOptions, BisectReport, Step, StoredOptions
from tracker.bisect_session import Bisection, StepCallback, StepProgress, take_session
from tracker.core.errors import UsageError
from tracker.core.measurements import Measurement
from tracker.core.records import SessionRow
from tracker.core.verification import Verification
from tracker.execution.executors import Executor
from tracker.measure import Prober
from tracker.probing import (
    DEFAULT_EXECUTION,
    QUIET,
    Selection,
    Watch,
    measured_with,
    probes_of,
    subjects,
)
from tracker.stored_bisect import answer_from_store
from tracker.verify import check_culprit, not_checked, unchecked
from tracker.workspace import ExecutionOptions, Workspace

DEFAULT_SEARCH = BisectOptions()
"""Frozen: one shared instance serves every call as a default."""


def bisect(
    selection: Selection,
    good: str = "",
    bad: str = "",
    search: BisectOptions = DEFAULT_SEARCH,
    options: ExecutionOptions = DEFAULT_EXECUTION,
    resume: bool = False,
    watch: Watch = QUIET,
    verify: bool | None = None,
) -> BisectReport:
    """The first bad commit after ``good`` up to ``bad`` (first-parent; with ``search.find_fix``
    the first fixed one), answered from stored results alone where they answer it. With
    ``resume``, the newest unfinished bisect of the target and probe, continued with the options
    it was started with. The culprit is checked (``tracker.verify``) from the store where it was
    checked before, else by one more execution: always with ``verify``, never with
    ``verify=False``, and by default after a search but not for an answer from stored results
    alone, which runs nothing and says how to check it, as asking again a question already
    answered should."""
    if not resume and not selection.fresh:
        report = _stored_bisect(selection, options, search, good, bad, watch, verify)
        if report is not None:
            if verify and report.verification is None and report.culprit is not None:
                _verify_stored_answer(selection, options, report, watch)
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
            steps = bisect_steps(ws, prober.repo_id, watch)
            bisection = Bisection(ws.store, ws.repo, prober, search, steps)
            report = bisection.resume(pending) if pending is not None else bisection.start(good, bad, asdict(options))
            check_and_store(ws, report, prober, verify is not False, watch)
            return report


def check_and_store(ws: Workspace, report: BisectReport, prober: Prober, verify: bool, watch: Watch) -> None:
    """The culprit of a finished bisect checked (``tracker.verify``) and kept with its session."""
    check_culprit(report, prober, verify, watch.measuring)
    if report.session_id is not None and report.verification is not None:
        checked = {"executions": report.executions, "check_executions": report.check_executions}
        ws.store.add_to_session_result(report.session_id, {"verification": report.verification.to_json(), **checked})


def _verify_stored_answer(selection: Selection, options: ExecutionOptions, report: BisectReport, watch: Watch) -> None:
    """The check of a culprit answered from the store that was never checked: run as a session's is."""
    with Workspace.open(selection.repo, selection.target) as opened:
        ws, probe = _bisect_probe(opened, selection)

        def checked(executor: Executor) -> None:
            prober = Prober.open(ws, probe, executor, "bisect", options.seed)
            check_culprit(report, prober, True, watch.measuring)

        measured_with(ws, options, watch, checked)


def _stored_bisect(
    selection: Selection,
    options: ExecutionOptions,
    search: BisectOptions,
    good: str,
    bad: str,
    watch: Watch,
    verify: bool | None,
) -> BisectReport | None:
    """The answer when every result the bisect takes is stored (``tracker.stored_bisect``), its
    steps told then, with the culprit's stored check (where none is stored: None with ``verify``,
    else what runs it); None where something would have to run."""
    try:
        with Workspace.open_read_only(selection.repo, selection.target) as opened:
            ws, probe = _bisect_probe(opened, selection)
            answer = answer_from_store(ws, probe, options, search, good, bad)
            if answer is None:
                return None
            watch.started(f"bisect {answer.report.probe}")
            steps = bisect_steps(ws, answer.repo_id, watch)
            for step in answer.steps:
                steps(*step)
            report, culprit = answer.report, answer.report.culprit
            if culprit is not None:
                found = unchecked(report, culprit, verify is not False) or _stored_check(ws, answer.repo_id, report)
                report.verification = found or (None if verify else not_checked(report, culprit, probe))
            return report
    except NotStored:
        return None


def _stored_check(ws: Workspace, repo_id: int, report: BisectReport) -> Verification | None:
    """The culprit's newest stored check against the bad end, else against another bad end (a
    scan checks a regression against the last bad commit before the next transition), as a
    stored answer tells it: nothing measured now."""
    assert report.culprit is not None
    key = (repo_id, ws.target.name, report.probe, report.culprit.sha)
    found = ws.store.verification(*key, report.bad) or ws.store.verification(*key)
    return replace(found, reused=True) if found is not None else None


def _bisect_probe(ws: Workspace, selection: Selection) -> tuple[Workspace, Probe]:
    if selection.command is None:
        return ws, ws.probe(selection.probes[0] if selection.probes else None)
    whole, probes = probes_of(ws, selection)
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


def bisect_steps(ws: Workspace, repo_id: int, watch: Watch) -> StepCallback:
    """A bisect's steps told to ``watch``, each with its commit's subject."""
    subject = subjects(ws, repo_id)

    def told(step: Step, measurement: Measurement, progress: StepProgress) -> None:
        watch.bisected(step, measurement, progress, subject(step.sha))

    return told
