"""Commands that run probes: run, bisect, scan, track. Each parses, calls one function of
``tracker.probing`` and renders what it returns; exit codes are ``tracker.core.exits``.

``run`` and ``track`` exit 0 when every commit asked about was judged and none is bad, 1 when one
is bad, 3 when none is bad but one could not be judged by any probe; for ``track`` the commit asked
about is the tracked head. ``bisect`` exits 1 when it names a commit (the first bad one, or with
--find-fix the first fixed one), 0 when it names none; 2 is bad usage.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

import tracker.bisecting as bisecting
import tracker.metric_bisect as metric_bisect
import tracker.probing as api
from tracker.bisect_options import BisectOptions
from tracker.cli import progress, render, render_perf
from tracker.cli.app import (
    F,
    emit_json,
    err,
    execution_options,
    execution_settings,
    given_with_resume,
    out,
    target_options,
)
from tracker.core.errors import UsageError
from tracker.report.ci import scan_json, track_json
from tracker.search.strategies import STRATEGIES, StrategyName

COMMAND_HELP = (
    "A command line to probe with instead, as for git bisect run (exit 0 good, 125 untestable, 1-127 bad, "
    "a signal or 128+ a crash); split like a shell would, never run through one; over the whole repository, "
    "no config needed."
)
FRESH_HELP = "Measure again even where a stored result would stand (the new result is stored beside the old)."
PROBES_HELP = "Probe to {} (repeatable; default: the target's probes)."


def probe_selection(verb: str) -> Callable[[F], F]:
    """``--probe`` (what to ``verb``), ``--command`` and ``--fresh``: what a probing command
    measures, and whether it measures again where a stored result would stand."""

    def decorate(command: F) -> F:
        command = click.option("--fresh", is_flag=True, help=FRESH_HELP)(command)
        command = click.option("--command", help=COMMAND_HELP)(command)
        return click.option("--probe", "probe_names", multiple=True, help=PROBES_HELP.format(verb))(command)

    return decorate


VERIFY_HELP = (
    "Check {}: measure the last bad commit with the culprit's change undone (one more execution; "
    "the user's checkout is left as it is)."
)


@click.command()
@click.argument("revs", nargs=-1, required=True)
@probe_selection("run")
@target_options
@execution_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def run(
    revs: tuple[str, ...],
    probe_names: tuple[str, ...],
    command: str | None,
    fresh: bool,
    repo: Path | None,
    target: str | None,
    as_json: bool,
    **execution: Any,
) -> None:
    """Run probes at REVS (stored results are reused); exit 1 if any revision is bad, else 3 if
    some revision could not be judged by any probe (every verdict untestable)."""
    options = execution_settings(**execution)
    selection = api.Selection(repo, target, probe_names, command, fresh)
    with progress.Reporter(err, "run") as reporter:
        report = api.measure_revisions(selection, revs, options, progress.Watcher(reporter))
    if as_json:
        emit_json({"rows": report.to_json()})
    else:
        out.print(render.measurements_table(report.rows))
    sys.exit(report.exit_status)


@click.command()
@click.option("--good", help="A revision where the probe passes.")
@click.option(
    "--bad", help="A later revision (on the first-parent line) where it fails; with --find-fix an earlier one."
)
@click.option(
    "--find-fix",
    is_flag=True,
    help="Find the first commit that passes after --bad (older) where it fails, up to --good.",
)
@click.option("--resume", is_flag=True, help="Continue the newest unfinished bisect of this target and probe.")
@click.option("--probe", "probe_name", help="Probe to bisect with (default: the target's first probe).")
@click.option("--command", help=COMMAND_HELP)
@click.option(
    "--strategy",
    type=click.Choice(STRATEGIES),
    default="auto",
    show_default=True,
    help="auto: bisection, Bayesian once results contradict or the probe's history flakes.",
)
@click.option(
    "--confidence",
    default=0.95,
    show_default=True,
    type=click.FloatRange(0.5, 1, max_open=True),
    help="Posterior probability at which a flake-aware search stops.",
)
@click.option(
    "--max-runs", type=click.IntRange(1), help="Most probe executions the session may spend (default: no bound)."
)
@click.option(
    "--assume-ends",
    is_flag=True,
    help="Take --good and --bad at your word, as git bisect does: the ends are not measured, and an untestable "
    "end is no obstacle.",
)
@click.option("--fresh", is_flag=True, help=FRESH_HELP)
@click.option(
    "--metric",
    metavar="PROBE:METRIC",
    help="Bisect a slowdown of a metric probe's metric instead of a failure: a step is bad when its samples are "
    "slower than --good's by more than --threshold (a rank test, more samples where it is unclear).",
)
@click.option(
    "--threshold",
    default="5%",
    show_default=True,
    help="With --metric: the smallest slowdown that counts, as 5% or 0.05.",
)
@click.option(
    "--verify/--no-verify",
    default=None,
    help=VERIFY_HELP.format("the culprit")
    + " On unless --no-verify; an answer from stored results alone shows the stored check, "
    "and runs one only with --verify.",
)
@target_options
@execution_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
def bisect(
    ctx: click.Context,
    good: str | None,
    bad: str | None,
    find_fix: bool,
    resume: bool,
    probe_name: str | None,
    command: str | None,
    strategy: StrategyName,
    confidence: float,
    max_runs: int | None,
    assume_ends: bool,
    fresh: bool,
    metric: str | None,
    threshold: str,
    verify: bool | None,
    repo: Path | None,
    target: str | None,
    as_json: bool,
    **execution: Any,
) -> None:
    """Find the first bad commit between --good and --bad (first-parent), reusing stored results.

    With --find-fix, the first fixed commit after --bad (older, failing) up to --good (passing).
    With --metric PROBE:METRIC, the first commit slower than --good by more than --threshold.
    With --workers W, W revisions are probed side by side in each round (one worker per GPU).
    --resume continues the newest unfinished bisect with the options it was started with."""
    if resume == bool(good or bad) or (not resume and not (good and bad)):
        raise click.UsageError("give both --good and --bad, or --resume alone")
    if metric is not None:
        selection = api.Selection(repo, target, fresh=fresh)
        _bisect_metric(ctx, selection, metric, threshold, good or "", bad or "", find_fix, verify, as_json, execution)
        return
    if ctx.get_parameter_source("threshold") is ParameterSource.COMMANDLINE:
        raise UsageError("--threshold applies to a --metric bisect; add --metric PROBE:METRIC or drop --threshold")
    if resume and (given := given_with_resume(ctx)):
        raise UsageError(f"--resume continues a bisect with the options it was started with; drop {' '.join(given)}")
    options = execution_settings(**execution)
    search = BisectOptions(strategy, options.workers, confidence, max_runs, find_fix, assume_ends)
    selection = api.Selection(repo, target, (probe_name,) if probe_name else (), command, fresh)
    with progress.Reporter(err, "bisect") as reporter:
        watch = progress.Watcher(reporter, search.workers)
        report = bisecting.bisect(selection, good or "", bad or "", search, options, resume, watch, verify)
    if as_json:
        emit_json(report.to_json())
    else:
        out.print(render.bisect_summary(report))
    sys.exit(report.exit_status)


METRIC_FLAGS_NOT_TAKEN = {
    "resume": "--resume",
    "probe_name": "--probe",
    "command": "--command",
    "strategy": "--strategy",
    "confidence": "--confidence",
    "max_runs": "--max-runs",
    "assume_ends": "--assume-ends",
    "workers": "--workers",
}


def _bisect_metric(
    ctx: click.Context,
    selection: api.Selection,
    metric: str,
    threshold: str,
    good: str,
    bad: str,
    find_fix: bool,
    verify: bool | None,
    as_json: bool,
    execution: dict[str, Any],
) -> None:
    """``bisect --metric``: one search of samples, its ends measured and its steps sampled as the rank test asks."""
    typed = [name for name in METRIC_FLAGS_NOT_TAKEN if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE]
    given = [METRIC_FLAGS_NOT_TAKEN[name] for name in typed]
    if given:
        raise UsageError(f"a --metric bisect samples each step as its rank test asks; drop {' '.join(given)}")
    options = execution_settings(**execution)
    with progress.Reporter(err, "bisect") as reporter:
        report = metric_bisect.bisect_metric(
            selection,
            metric,
            good,
            bad,
            threshold=metric_bisect.parse_threshold(threshold),
            find_fix=find_fix,
            options=options,
            watch=progress.Watcher(reporter, 1),
            verify=verify is not False,
        )
    if as_json:
        emit_json(report.to_json())
    else:
        out.print(render_perf.metric_bisect_summary(report))
    sys.exit(report.exit_status)


@click.command()
@click.argument("range_spec", metavar="RANGE", default="HEAD")
@probe_selection("scan with")
@click.option(
    "--max-samples",
    default=64,
    show_default=True,
    type=click.IntRange(2),
    help="Measure every distinct target tree when the range has at most this many.",
)
@click.option(
    "--confirm",
    default=2,
    show_default=True,
    type=click.IntRange(0),
    help="Reruns of a bad side before a transition is reported (none for a deterministic probe).",
)
@click.option("--verify/--no-verify", default=False, show_default=True, help=VERIFY_HELP.format("each regression"))
@target_options
@execution_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def scan(
    range_spec: str,
    probe_names: tuple[str, ...],
    max_samples: int,
    confirm: int,
    command: str | None,
    fresh: bool,
    verify: bool,
    repo: Path | None,
    target: str | None,
    as_json: bool,
    **execution: Any,
) -> None:
    """Every transition of each probe along RANGE (A..B, or B for its whole first-parent line):
    exit 1 if a probe fails at the range's last commit, else 3 if nothing in the range could be judged."""
    options = execution_settings(**execution)
    selection = api.Selection(repo, target, probe_names, command, fresh)
    with progress.Reporter(err, "scan") as reporter:
        report = api.scan(selection, range_spec, max_samples, confirm, options, progress.Watcher(reporter), verify)
    if as_json:
        emit_json(scan_json(report))
    else:
        out.print(render.scan_summary(report))
    sys.exit(report.exit_status)


@click.command()
@click.option("--branch", help="Branch to follow (default: the target's branch).")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the JUnit XML, markdown and JSON go (default: the data directory's reports/).",
)
@click.option("--wait", is_flag=True, help="Wait for a running track of the same target instead of exiting.")
@probe_selection("track")
@click.option("--verify/--no-verify", default=True, show_default=True, help=VERIFY_HELP.format("each new regression"))
@target_options
@execution_options
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report.")
def track(
    branch: str | None,
    out_dir: Path | None,
    wait: bool,
    probe_names: tuple[str, ...],
    command: str | None,
    fresh: bool,
    verify: bool,
    repo: Path | None,
    target: str | None,
    as_json: bool,
    **execution: Any,
) -> None:
    """The scheduled job: probe new commits, record transitions, pin down new regressions, judge
    the head: exit 1 if a probe fails at the head, else 3 if no probe could judge it."""
    options = execution_settings(**execution)
    selection = api.Selection(repo, target, probe_names, command, fresh)
    with progress.Reporter(err, "track") as reporter:
        result = api.track(selection, branch, out_dir, wait, options, progress.Watcher(reporter), verify)
    if as_json:
        emit_json(track_json(result))
    else:
        out.print(render.track_summary(result, result.reports))
    sys.exit(result.exit_status)
