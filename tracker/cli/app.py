"""The ``regtrack`` command line: parses options, calls the Python API, prints.

Exit codes: 0 ok, 1 a probe failed or a regression was found, 2 bad usage or input.
"""

from __future__ import annotations

import json
import os
import re
import sys
from datetime import datetime, timezone
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

import click
from click.core import ParameterSource
from rich.console import Console

from db.paths import data_dir
from probes.api import Outcome

from tracker.cli import render
from tracker.search.strategies import STRATEGIES, StrategyName
from tracker.bisect_session import BisectOptions, BisectSession, StoredOptions
from tracker.core.errors import UsageError
from tracker.queries import filter_runs, parse_tolerance, regressions_of, verdict_under
from tracker.report.build import build_report
from tracker.report.html import render_html
from tracker.scan import Scanner
from tracker.targets.snapshots import SnapshotCache
from tracker.track import record_scan, run_track, track_lock, write_reports
from tracker.search.transitions import State
from tracker.core.verdicts import Verdict
from tracker.workspace import ExecutionOptions, Workspace

F = TypeVar("F", bound=Callable[..., Any])
DTYPES = ("float32", "bfloat16", "float16", "float64")
DEVICE = re.compile(r"cpu|cuda(:\d+)?")
out = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, highlight=False)


def target_options(command: F) -> F:
    command = click.option("--repo", type=click.Path(path_type=Path), help="Repository to work on (default: the one around the current directory).")(command)
    return click.option("--target", help="Target from regtrack.toml (default: the only one).")(command)


def execution_options(command: F) -> F:
    options = [
        click.option("--device", default="cpu", show_default=True, callback=_check_device, help="cpu, cuda or cuda:N."),
        click.option("--dtype", type=click.Choice(DTYPES), help="Probe dtype (default: float32 on cpu, bfloat16 on cuda)."),
        click.option("--workers", default=1, show_default=True, type=click.IntRange(1), help="Probe worker processes."),
        click.option("--timeout", default=300.0, show_default=True, type=click.FloatRange(min=0.1), help="Seconds one probe case may take."),
        click.option("--seed", type=int, help="Fix the probes' seed (default: a fresh one per execution, stored)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _check_device(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if not DEVICE.fullmatch(value):
        raise click.BadParameter(f"{value!r} is not a device; use cpu, cuda or cuda:N")
    return value


def _execution(device: str, dtype: str | None, workers: int, timeout: float, seed: int | None) -> ExecutionOptions:
    return ExecutionOptions(device, dtype, workers, timeout, seed)


EXECUTION_FLAGS = {"device": "--device", "dtype": "--dtype", "workers": "--workers", "timeout": "--timeout", "seed": "--seed"}
SEARCH_FLAGS = {"strategy": "--strategy", "confidence": "--confidence", "max_runs": "--max-runs"}


def _given_with_resume(ctx: click.Context) -> list[str]:
    """The search and execution flags typed on a ``--resume`` command line: a resumed session keeps its own."""
    flags = {**SEARCH_FLAGS, **EXECUTION_FLAGS}
    return [flag for name, flag in flags.items() if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE]


@contextmanager
def workspace(repo: Path | None, target: str | None) -> Iterator[Workspace]:
    ws = Workspace.open(repo, target)
    try:
        yield ws
    finally:
        ws.close()


class RegtrackGroup(click.Group):
    """Turns a ``UsageError`` into one line on stderr and exit code 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except UsageError as error:
            click.echo(f"regtrack: error: {error}", err=True)
            sys.exit(2)
        except KeyboardInterrupt:
            click.echo("regtrack: interrupted; finished results are stored (resume a bisect with --resume)", err=True)
            sys.exit(130)


@click.group(cls=RegtrackGroup)
@click.version_option(package_name="regtrack")
def main() -> None:
    """Regression tracking and bisect automation for GPU attention backends."""


def _emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, default=str))



@main.command()
@click.argument("revs", nargs=-1, required=True)
@click.option("--probe", "probe_names", multiple=True, help="Probe to run (repeatable; default: the target's probes).")
@target_options
@execution_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def run(revs: tuple[str, ...], probe_names: tuple[str, ...], repo: Path | None, target: str | None, as_json: bool, **execution: Any) -> None:
    """Run probes at REVS (stored results are reused); exit 1 if any revision is bad."""
    options = _execution(**execution)
    with workspace(repo, target) as ws, options.executor() as executor:
        shas = [ws.repo.resolve(rev) for rev in revs]
        rows = []
        for probe in ws.probes(probe_names):
            prober = ws.prober(probe, executor, "run", options.seed)
            trees = prober.record_commits(shas)
            for sha in shas:
                with err.status(f"{probe.name} at {sha[:12]}"):
                    rows.append(render.measurement_row(ws.store.commit(prober.repo_id, sha), probe.name, prober.measure(sha, trees[sha])))
    if as_json:
        _emit_json(rows)
    else:
        out.print(render.measurements_table(rows))
    sys.exit(1 if any(r["verdict"] == Verdict.BAD.value for r in rows) else 0)


@main.command()
@click.option("--good", help="A revision where the probe passes.")
@click.option("--bad", help="A later revision (on the first-parent line) where it fails.")
@click.option("--resume", is_flag=True, help="Continue the newest unfinished bisect of this target and probe.")
@click.option("--probe", "probe_name", help="Probe to bisect with (default: the target's first probe).")
@click.option("--strategy", type=click.Choice(STRATEGIES), default="auto", show_default=True, help="auto: bisection, Bayesian once results contradict or the probe's history flakes.")
@click.option("--confidence", default=0.95, show_default=True, type=click.FloatRange(0.5, 1, max_open=True), help="Posterior probability at which a flake-aware search stops.")
@click.option("--max-runs", type=click.IntRange(1), help="Most probe executions the session may spend (default: no bound).")
@target_options
@execution_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
def bisect(ctx: click.Context, good: str | None, bad: str | None, resume: bool, probe_name: str | None, strategy: StrategyName, confidence: float, max_runs: int | None, repo: Path | None, target: str | None, as_json: bool, **execution: Any) -> None:
    """Find the first bad commit between --good and --bad (first-parent), reusing stored results.

    With --workers W, W revisions are probed side by side in each round (one worker per GPU).
    --resume continues the newest unfinished bisect with the options it was started with."""
    if resume == bool(good or bad) or (not resume and not (good and bad)):
        raise click.UsageError("give both --good and --bad, or --resume alone")
    if resume and (given := _given_with_resume(ctx)):
        raise UsageError(f"--resume continues a bisect with the options it was started with; drop {' '.join(given)}")
    options = _execution(**execution)
    search = BisectOptions(strategy, options.workers, confidence, max_runs)
    with workspace(repo, target) as ws:
        probe = ws.probe(probe_name)
        pending = ws.unfinished_bisect(probe) if resume else None
        if pending is not None:
            stored = StoredOptions.of(pending)
            options, search = ExecutionOptions(**stored.execution), stored.search
        with options.executor() as executor:
            session = BisectSession(ws.store, ws.repo, ws.prober(probe, executor, "bisect", options.seed), search, render.step_printer(err))
            report = session.resume(pending) if pending is not None else session.start(good or "", bad or "", asdict(options))
    if as_json:
        _emit_json(report.to_json())
    else:
        out.print(render.bisect_summary(report))
    sys.exit(1 if report.culprit or report.candidates else 0)


@main.command()
@click.argument("range_spec", metavar="RANGE", default="HEAD")
@click.option("--probe", "probe_names", multiple=True, help="Probe to scan with (repeatable; default: the target's probes).")
@click.option("--max-samples", default=64, show_default=True, type=click.IntRange(2), help="Measure every distinct target tree when the range has at most this many.")
@click.option("--confirm", default=2, show_default=True, type=click.IntRange(0), help="Reruns of a bad side before a transition is reported.")
@target_options
@execution_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def scan(range_spec: str, probe_names: tuple[str, ...], max_samples: int, confirm: int, repo: Path | None, target: str | None, as_json: bool, **execution: Any) -> None:
    """Every transition of each probe along RANGE (A..B, or B for its whole first-parent line)."""
    options = _execution(**execution)
    with workspace(repo, target) as ws, options.executor() as executor:
        line = ws.repo.line(range_spec)
        probers = [ws.prober(p, executor, "scan", options.seed) for p in ws.probes(probe_names)]
        with err.status("scanning") as status:
            report = Scanner(ws.repo, probers, max_samples, confirm, progress=lambda text: status.update(f"scanning: {text}")).scan(line)
        record_scan(ws, probers[0].repo_id, report)
    if as_json:
        _emit_json(report.to_json())
    else:
        out.print(render.scan_summary(report))
    sys.exit(1 if any(p.states and p.states[-1] is State.BAD for p in report.probes) else 0)


@main.command()
@click.option("--branch", help="Branch to follow (default: the target's branch).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), help="Where the JUnit XML, markdown and JSON go (default: the data directory's reports/).")
@click.option("--wait", is_flag=True, help="Wait for a running track of the same target instead of exiting.")
@click.option("--probe", "probe_names", multiple=True, help="Probe to track (repeatable; default: the target's probes).")
@target_options
@execution_options
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report.")
def track(branch: str | None, out_dir: Path | None, wait: bool, probe_names: tuple[str, ...], repo: Path | None, target: str | None, as_json: bool, **execution: Any) -> None:
    """The scheduled job: probe new commits, record transitions, pin down new regressions (exit 1)."""
    options = _execution(**execution)
    with workspace(repo, target) as ws:
        with track_lock(ws.repo.path, ws.target.name, wait), options.executor() as executor:
            probers = [ws.prober(p, executor, "track", options.seed) for p in ws.probes(probe_names)]
            with err.status("tracking"):
                result = run_track(ws, branch or ws.target.branch, executor, options.seed, probers)
        reports = write_reports(result, out_dir or data_dir() / "reports" / ws.target.name, ws.repo.path, [p.probe.name for p in probers])
    if as_json:
        _emit_json(result.to_json())
    else:
        out.print(render.track_summary(result, reports))
    sys.exit(1 if result.new_regressions else 0)


@main.command()
@click.option("--open", "only_open", is_flag=True, help="Only regressions not fixed since.")
@target_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def regressions(only_open: bool, repo: Path | None, target: str | None, as_json: bool) -> None:
    """Regressions found by scans and the scheduled job."""
    with workspace(repo, target) as ws:
        repo_id = ws.store.repository(ws.repo.path)
        found = regressions_of(ws.store.transitions(repo_id, ws.target.name), only_open)
        commits = {t.sha: ws.store.commit(repo_id, t.sha) for t in found}
    if as_json:
        _emit_json([render.transition_json(t, commits[t.sha]) for t in found])
    else:
        out.print(render.regressions_table(found, commits, only_open))


@main.command()
@click.option("--probe", "probe_name", help="Only this probe.")
@click.option("--range", "range_spec", help="Only commits of this first-parent range (A..B, or B).")
@click.option("--since", type=click.DateTime(), help="Only runs started at or after this time (UTC).")
@click.option("--until", type=click.DateTime(), help="Only runs started at or before this time (UTC).")
@click.option("--env", "environment", help="Only runs in this environment: a fingerprint prefix or part of the GPU name (cpu for none).")
@click.option("--outcome", type=click.Choice([o.value for o in Outcome]), help="Only runs with this outcome.")
@click.option("--tolerance", type=click.FloatRange(min=0), help="Re-derive verdicts from stored metrics with this relative-error bound.")
@click.option("--abs-tolerance", type=click.FloatRange(min=0), help="With --tolerance: also bound the max abs error.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1), help="Newest runs to show.")
@target_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def history(probe_name: str | None, range_spec: str | None, since: datetime | None, until: datetime | None, environment: str | None, outcome: str | None, tolerance: float | None, abs_tolerance: float | None, limit: int, repo: Path | None, target: str | None, as_json: bool) -> None:
    """Stored probe runs, newest first, filtered; nothing is run."""
    with workspace(repo, target) as ws:
        shas = ws.repo.line(range_spec) if range_spec else None
        runs = ws.store.runs(repo_id=ws.store.repository(ws.repo.path), probe=probe_name, shas=shas, outcome=outcome)
    runs = filter_runs(runs, _utc(since), _utc(until), environment)[:limit]
    rederived = {r.id: verdict_under(r, parse_tolerance(tolerance, abs_tolerance)) for r in runs} if tolerance is not None else None
    if as_json:
        _emit_json([render.run_json(r, rederived) for r in runs])
    else:
        out.print(render.runs_table(runs, "stored runs, newest first", rederived))


def _utc(moment: datetime | None) -> datetime | None:
    return moment.replace(tzinfo=timezone.utc) if moment is not None and moment.tzinfo is None else moment


@main.command()
@click.argument("rev")
@target_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def show(rev: str, repo: Path | None, target: str | None, as_json: bool) -> None:
    """Everything stored about REV: its commit and every probe run of it."""
    with workspace(repo, target) as ws:
        sha = ws.repo.resolve(rev)
        repo_id = ws.store.repository(ws.repo.path)
        commit = ws.store.commit(repo_id, sha) or ws.repo.commit_info(sha)
        runs = ws.store.runs(repo_id=repo_id, shas=[sha])
    if as_json:
        _emit_json({"commit": render.commit_json(commit), "runs": [render.run_json(r) for r in runs]})
    else:
        out.print(render.commit_header(commit))
        out.print(render.runs_table(runs, f"runs of {sha[:12]}") if runs else "no stored runs; measure it with `regtrack run`")


@main.command()
@click.option("--html", "html_path", required=True, type=click.Path(path_type=Path), help="The page to write: one self-contained HTML file.")
@click.option("--range", "range_spec", help="First-parent range to show (A..B, or B; default: the target's branch).")
@click.option("--probe", "probe_names", multiple=True, help="Probe to show (repeatable; default: the target's probes).")
@click.option("--env", "environment", help="Only runs in this environment: a fingerprint prefix or part of the GPU name (cpu for none).")
@target_options
def report(html_path: Path, range_spec: str | None, probe_names: tuple[str, ...], environment: str | None, repo: Path | None, target: str | None) -> None:
    """Write an HTML report of the stored results along the first-parent line; nothing is run."""
    _check_writable(html_path)
    with workspace(repo, target) as ws:
        data = build_report(ws, range_spec, probe_names, environment)
    _write_atomically(html_path, render_html(data))
    click.echo(f"wrote {html_path}: {len(data.commits)} commits, {len(data.probes)} probes, {len(data.transitions)} transitions")


def _check_writable(path: Path) -> None:
    """Fail before the work, not after it."""
    if path.is_dir():
        raise UsageError(f"--html {path} is a directory; name a file, e.g. {path / 'report.html'}")
    if not path.parent.is_dir():
        raise UsageError(f"cannot write {path}: directory {path.parent} does not exist; create it or pass another --html")


def _write_atomically(path: Path, text: str) -> None:
    """Through a temporary file in the same directory and a rename: a reader sees the old page or the new one."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(text, encoding="utf-8")
        temporary.replace(path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise UsageError(f"cannot write {path} ({exc.strerror}); check its directory's permissions or pass another --html") from None


SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class Quantity(click.ParamType):
    """A number with a unit suffix: sizes (10G, 500M) or ages (30d, 12h)."""

    def __init__(self, name: str, units: dict[str, int], example: str) -> None:
        self.name, self.units, self.example = name, units, example

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([A-Za-z]?)", str(value).strip())
        unit = match.group(2).upper() if match and self.units is SIZE_UNITS else (match.group(2) if match else "")
        if not match or unit not in self.units:
            self.fail(f"{value!r} is not a {self.name} such as {self.example}", param, ctx)
        return float(match.group(1)) * self.units[unit]


@main.command()
@click.option("--max-size", default="10G", show_default=True, type=Quantity("size", SIZE_UNITS, "10G or 500M"), help="Keep the snapshot cache under this size, removing the least recently used first.")
@click.option("--max-age", default="30d", show_default=True, type=Quantity("age", AGE_UNITS, "30d or 12h"), help="Remove snapshots unused for longer.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def gc(max_size: float, max_age: float, as_json: bool) -> None:
    """Clean the snapshot cache: interrupted extractions, and snapshots past the bounds. A snapshot
    used within the last hour is kept (another process may be probing it)."""
    report = SnapshotCache().gc(int(max_size), max_age)
    if as_json:
        _emit_json({"cache": str(SnapshotCache().root), **asdict(report)})
    else:
        out.print(f"{SnapshotCache().root}: {report}")


@main.group()
def db() -> None:
    """The results database."""


@db.command()
@click.option("--url", help="SQLAlchemy URL (default: REGTRACK_DB_URL, else the file in the data directory).")
def upgrade(url: str | None) -> None:
    """Migrate the database to the newest schema."""
    from db.store import upgrade as upgrade_database

    upgrade_database(url)
    out.print("database is at the newest schema")


@main.command()
@click.argument("path", required=False, type=click.Path(path_type=Path))
@click.option("--commits", default=150, show_default=True, type=click.IntRange(60), help="First-parent commits.")
@execution_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def demo(path: Path | None, commits: int, as_json: bool, **execution: Any) -> None:
    """Build the demo history, print each probe's verdict on its key commits, and bisect its stories."""
    from tracker.demo import walkthrough as demo_api

    options = _execution(**execution)
    history_path = path or demo_api.default_path()
    manifest = demo_api.ensure_history(history_path, commits, err)
    with workspace(history_path, None) as ws, options.executor() as executor:
        result = demo_api.run_demo(ws, manifest, executor, options.seed, err)
    if as_json:
        _emit_json(result.to_json())
    else:
        out.print(render.demo_verdicts(result))
        for report in result.bisects:
            out.print(render.bisect_summary(report))


if __name__ == "__main__":
    main()
