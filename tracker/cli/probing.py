"""Commands that run probes: run, bisect, scan, track.

``run`` and ``track`` exit 0 when every commit asked about was judged and none is bad, 1 when one
is bad, 3 when none is bad but one could not be judged by any probe (``tracker.report.ci``); for
``track`` the commit asked about is the tracked head. ``bisect`` exits 1 when it names a commit
(the first bad one, or with --find-fix the first fixed one), 0 when it names none; 2 is bad usage.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

import click

from db.paths import data_dir
from probes.api import Probe
from db.readonly import NotStored
from tracker.bisect_options import BisectOptions, BisectReport, StoredOptions
from tracker.bisect_session import BisectSession
from tracker.cli import progress, render
from tracker.cli.app import (
    emit_json,
    err,
    execution_options,
    execution_settings,
    given_with_resume,
    main,
    out,
    target_options,
    workspace,
)
from tracker.core.errors import UsageError
from tracker.core.verdicts import Verdict
from tracker.execution.executors import EnvironmentRefuted, Executor
from tracker.report.ci import exit_status, scan_exit_status, write_reports
from tracker.scan import ScanReport, Scanner, history_cut_warning
from tracker.search.strategies import STRATEGIES, StrategyName
from tracker.stored_bisect import answer_from_store
from tracker.track import TrackResult, record_scan, run_track, track_lock
from tracker.workspace import ExecutionOptions, Workspace

T = TypeVar("T")

COMMAND_HELP = (
    "A command line to probe with instead, as for git bisect run (exit 0 good, 125 untestable, 1-127 bad, "
    "a signal or 128+ a crash); split like a shell would, never run through one; over the whole repository, no config needed."
)


FRESH_HELP = "Measure again even where a stored result would stand (the new result is stored beside the old)."


def probes_or_command(ws: Workspace[Any], command: str | None, probe_names: tuple[str, ...]) -> list[Probe]:
    """``--command``'s probe, or the named probes (default: the target's)."""
    return [command_probe(ws, command, probe_names)] if command is not None else ws.probes(probe_names)


def told_by_workers_if_refuted(ws: Workspace[Any], options: ExecutionOptions, measure: Callable[[Executor], T]) -> T:
    """``measure`` with an executor that takes a local GPU's stack from nvidia-smi, so that a command
    that finds every result stored starts no worker. Where the first worker to start words the GPU
    otherwise, nothing has run yet and what was looked up was looked up under nvidia-smi's words:
    ``measure`` again, with an executor whose workers tell every stack."""
    try:
        with options.executor(ws.config.executor, gpu_told_by_nvidia_smi=True) as executor:
            return measure(executor)
    except EnvironmentRefuted as refuted:
        err.print(f"regtrack: {refuted}; measuring again with the workers' description")
        with options.executor(ws.config.executor) as executor:
            return measure(executor)


def command_probe(ws: Workspace[Any], command: str, probe_names: tuple[str, ...]) -> Probe:
    if probe_names:
        raise UsageError("give --probe or --command, not both")
    return ws.command_probe(command)


@main.command()
@click.argument("revs", nargs=-1, required=True)
@click.option("--probe", "probe_names", multiple=True, help="Probe to run (repeatable; default: the target's probes).")
@click.option("--command", help=COMMAND_HELP)
@click.option("--fresh", is_flag=True, help=FRESH_HELP)
@target_options
@execution_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def run(revs: tuple[str, ...], probe_names: tuple[str, ...], command: str | None, fresh: bool, repo: Path | None, target: str | None, as_json: bool, **execution: Any) -> None:
    """Run probes at REVS (stored results are reused); exit 1 if any revision is bad, else 3 if
    some revision could not be judged by any probe (every verdict untestable)."""
    options = execution_settings(**execution)
    with workspace(repo, target) as ws:
        shas = [ws.repo.resolve(rev) for rev in revs]
        probes = probes_or_command(ws, command, probe_names)
        rows = told_by_workers_if_refuted(ws, options, lambda executor: measured_rows(ws, probes, shas, options, executor, fresh))
    if as_json:
        emit_json(rows)
    else:
        out.print(render.measurements_table(rows))
    verdicts: dict[str, list[Verdict]] = {sha: [] for sha in shas}
    for r in rows:
        verdicts[r["sha"]].append(Verdict(r["verdict"]))
    sys.exit(exit_status(verdicts))


@main.command()
@click.option("--good", help="A revision where the probe passes.")
@click.option("--bad", help="A later revision (on the first-parent line) where it fails; with --find-fix an earlier one.")
@click.option("--find-fix", is_flag=True, help="Find the first commit that passes after --bad (older) where it fails, up to --good.")
@click.option("--resume", is_flag=True, help="Continue the newest unfinished bisect of this target and probe.")
@click.option("--probe", "probe_name", help="Probe to bisect with (default: the target's first probe).")
@click.option("--command", help=COMMAND_HELP)
@click.option("--strategy", type=click.Choice(STRATEGIES), default="auto", show_default=True, help="auto: bisection, Bayesian once results contradict or the probe's history flakes.")
@click.option("--confidence", default=0.95, show_default=True, type=click.FloatRange(0.5, 1, max_open=True), help="Posterior probability at which a flake-aware search stops.")
@click.option("--max-runs", type=click.IntRange(1), help="Most probe executions the session may spend (default: no bound).")
@click.option("--assume-ends", is_flag=True, help="Take --good and --bad at your word, as git bisect does: the ends are not measured, and an untestable end is no obstacle.")
@click.option("--fresh", is_flag=True, help=FRESH_HELP)
@target_options
@execution_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
def bisect(ctx: click.Context, good: str | None, bad: str | None, find_fix: bool, resume: bool, probe_name: str | None, command: str | None, strategy: StrategyName, confidence: float, max_runs: int | None, assume_ends: bool, fresh: bool, repo: Path | None, target: str | None, as_json: bool, **execution: Any) -> None:
    """Find the first bad commit between --good and --bad (first-parent), reusing stored results.

    With --find-fix, the first fixed commit after --bad (older, failing) up to --good (passing).
    With --workers W, W revisions are probed side by side in each round (one worker per GPU).
    --resume continues the newest unfinished bisect with the options it was started with."""
    if resume == bool(good or bad) or (not resume and not (good and bad)):
        raise click.UsageError("give both --good and --bad, or --resume alone")
    if resume and (given := given_with_resume(ctx)):
        raise UsageError(f"--resume continues a bisect with the options it was started with; drop {' '.join(given)}")
    options = execution_settings(**execution)
    search = BisectOptions(strategy, options.workers, confidence, max_runs, find_fix, assume_ends)
    report = None if resume or fresh else stored_bisect(repo, target, command, probe_name, options, search, good or "", bad or "")
    if report is None:
        report = bisect_session(repo, target, command, probe_name, options, search, resume, fresh, good or "", bad or "")
    if as_json:
        emit_json(report.to_json())
    else:
        out.print(render.bisect_summary(report))
    sys.exit(1 if report.culprit or report.candidates else 0)


def measured_rows(
    ws: Workspace[Any], probes: list[Probe], shas: list[str], options: ExecutionOptions, executor: Executor, fresh: bool
) -> list[dict[str, Any]]:
    """``run``'s table: each probe at each commit."""
    rows: list[dict[str, Any]] = []
    with progress.Reporter(err, "run") as reporter:
        for probe in probes:
            prober = ws.prober(probe, executor, "run", options.seed, fresh)
            trees = prober.record_commits(shas)
            for sha in shas:
                reporter.doing(f"{probe.name} at {sha[:12]}")
                started = time.perf_counter()
                rows.append(render.measurement_row(ws.store.commit(prober.repo_id, sha), probe.name, prober.measure(sha, trees[sha])))
                reporter.step(progress.run_tick(len(rows), len(shas) * len(probes), rows[-1], time.perf_counter() - started))
    return rows


def bisect_probe(ws: Workspace[Any], command: str | None, probe_name: str | None) -> Probe:
    return command_probe(ws, command, (probe_name,) if probe_name else ()) if command is not None else ws.probe(probe_name)


def stored_bisect(
    repo: Path | None, target: str | None, command: str | None, probe_name: str | None,
    options: ExecutionOptions, search: BisectOptions, good: str, bad: str,
) -> BisectReport | None:  # fmt: skip
    """The answer when every result the bisect takes is stored (``tracker.stored_bisect``), its steps shown then."""
    try:
        with Workspace.open_read_only(repo, target) as ws:
            answer = answer_from_store(ws, bisect_probe(ws, command, probe_name), options, search, good, bad)
            if answer is None:
                return None
            with progress.Reporter(err, f"bisect {answer.report.probe}") as reporter:
                steps = progress.bisect_steps(reporter, progress.stored_subjects(ws.store, answer.repo_id), search.workers)
                for step in answer.steps:
                    steps(*step)
            return answer.report
    except NotStored:
        return None


def bisect_session(
    repo: Path | None, target: str | None, command: str | None, probe_name: str | None,
    options: ExecutionOptions, search: BisectOptions, resume: bool, fresh: bool, good: str, bad: str,
) -> BisectReport:  # fmt: skip
    """A bisect session over the full store: started, or with ``resume`` the newest unfinished one continued."""
    with workspace(repo, target) as ws:
        probe = bisect_probe(ws, command, probe_name)
        pending = ws.unfinished_bisect(probe) if resume else None
        if pending is not None:
            stored = StoredOptions.of(pending)
            options, search = ExecutionOptions(**stored.execution), stored.search
        with options.executor(ws.config.executor) as executor, progress.Reporter(err, f"bisect {probe.name}") as reporter:
            prober = ws.prober(probe, executor, "bisect", options.seed, fresh)
            steps = progress.bisect_steps(reporter, progress.stored_subjects(ws.store, prober.repo_id), search.workers)
            session = BisectSession(ws.store, ws.repo, prober, search, steps)
            return session.resume(pending) if pending is not None else session.start(good, bad, asdict(options))


@main.command()
@click.argument("range_spec", metavar="RANGE", default="HEAD")
@click.option("--probe", "probe_names", multiple=True, help="Probe to scan with (repeatable; default: the target's probes).")
@click.option("--max-samples", default=64, show_default=True, type=click.IntRange(2), help="Measure every distinct target tree when the range has at most this many.")
@click.option("--confirm", default=2, show_default=True, type=click.IntRange(0), help="Reruns of a bad side before a transition is reported (none for a deterministic probe).")
@click.option("--command", help=COMMAND_HELP)
@click.option("--fresh", is_flag=True, help=FRESH_HELP)
@target_options
@execution_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def scan(range_spec: str, probe_names: tuple[str, ...], max_samples: int, confirm: int, command: str | None, fresh: bool, repo: Path | None, target: str | None, as_json: bool, **execution: Any) -> None:
    """Every transition of each probe along RANGE (A..B, or B for its whole first-parent line):
    exit 1 if a probe fails at the range's last commit, else 3 if nothing in the range could be judged."""
    options = execution_settings(**execution)
    with workspace(repo, target) as ws:
        line = ws.repo.line(range_spec)
        if warning := history_cut_warning(ws.repo, line):
            click.echo(f"regtrack: warning: {warning}", err=True)
        probes = probes_or_command(ws, command, probe_names)
        report = told_by_workers_if_refuted(ws, options, lambda executor: scanned(ws, probes, line, max_samples, confirm, options, executor, fresh))
    if as_json:
        emit_json(report.to_json())
    else:
        out.print(render.scan_summary(report))
    sys.exit(scan_exit_status(report))


def scanned(
    ws: Workspace[Any], probes: list[Probe], line: list[str], max_samples: int, confirm: int,
    options: ExecutionOptions, executor: Executor, fresh: bool,
) -> ScanReport:  # fmt: skip
    """``scan``'s report of ``line``, its transitions recorded."""
    probers = [ws.prober(p, executor, "scan", options.seed, fresh) for p in probes]
    with progress.Reporter(err, "scan") as reporter:
        steps = progress.scan_steps(reporter, progress.stored_subjects(ws.store, probers[0].repo_id))
        report = Scanner(ws.repo, probers, max_samples, confirm, progress=steps).scan(line)
    record_scan(ws, probers[0].repo_id, report)
    return report


@main.command()
@click.option("--branch", help="Branch to follow (default: the target's branch).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), help="Where the JUnit XML, markdown and JSON go (default: the data directory's reports/).")
@click.option("--wait", is_flag=True, help="Wait for a running track of the same target instead of exiting.")
@click.option("--probe", "probe_names", multiple=True, help="Probe to track (repeatable; default: the target's probes).")
@click.option("--command", help=COMMAND_HELP)
@click.option("--fresh", is_flag=True, help=FRESH_HELP)
@target_options
@execution_options
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report.")
def track(branch: str | None, out_dir: Path | None, wait: bool, probe_names: tuple[str, ...], command: str | None, fresh: bool, repo: Path | None, target: str | None, as_json: bool, **execution: Any) -> None:
    """The scheduled job: probe new commits, record transitions, pin down new regressions, judge
    the head: exit 1 if a probe fails at the head, else 3 if no probe could judge it."""
    options = execution_settings(**execution)
    with workspace(repo, target) as ws:
        probes = probes_or_command(ws, command, probe_names)
        with track_lock(ws.store, ws.repo.path, ws.target.name, wait):
            result = told_by_workers_if_refuted(ws, options, lambda executor: tracked(ws, branch or ws.target.branch, probes, options, executor, fresh))
        reports = write_reports(result, out_dir or data_dir() / "reports" / ws.target.name, ws.repo.path)
    if as_json:
        emit_json(result.to_json())
    else:
        out.print(render.track_summary(result, reports))
    sys.exit(result.exit_status)


def tracked(ws: Workspace[Any], branch: str, probes: list[Probe], options: ExecutionOptions, executor: Executor, fresh: bool) -> TrackResult:
    """``track``'s result. Its scan measures every commit it records a transition of, the head
    included, so a worker that refutes nvidia-smi does so before anything is recorded."""
    probers = [ws.prober(p, executor, "track", options.seed, fresh) for p in probes]
    with progress.Reporter(err, "track") as reporter:
        steps = progress.scan_steps(reporter, progress.stored_subjects(ws.store, probers[0].repo_id))
        return run_track(ws, branch, executor, options.seed, probers, steps)
