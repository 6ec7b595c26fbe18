"""Commands that answer from the store, running nothing: regressions, history, show, report."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import click

from tracker.cli import render
from tracker.cli.app import emit_json, out, target_options, workspace
from tracker.core.errors import UsageError
from tracker.core.verdicts import Outcome
from tracker.queries import (
    RunFilter,
    history_runs,
    parse_tolerance,
    runs_at,
    stored_regressions,
    verdict_under,
)
from tracker.report.ci import transition_json


@click.command()
@click.option("--open", "only_open", is_flag=True, help="Only regressions not fixed since.")
@target_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option(
    "--markdown",
    is_flag=True,
    help="Print a paste-ready GitHub issue for each regression, separated by a line of ---.",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path),
    help="With --markdown: write each issue to DIR/regression-<probe>-<sha>.md instead, and print the paths.",
)
def regressions(
    only_open: bool, repo: Path | None, target: str | None, as_json: bool, markdown: bool, out_dir: Path | None
) -> None:
    """Regressions found by scans and the scheduled job; with --markdown, an issue for each."""
    if markdown or out_dir is not None:
        _issues(only_open, repo, target, as_json, markdown, out_dir)
        return
    with workspace(repo, target) as ws:
        found, commits = stored_regressions(ws, only_open)
    if as_json:
        emit_json({"regressions": [transition_json(t, commits[t.sha]) for t in found]})
    else:
        out.print(render.regressions_table(found, commits, only_open))


def _issues(
    only_open: bool, repo: Path | None, target: str | None, as_json: bool, markdown: bool, out_dir: Path | None
) -> None:
    """The issues of ``regressions --markdown``: printed, or written one file each into ``out_dir``."""
    from tracker.issue_report import regression_issues
    from tracker.report.ci import write_issues
    from tracker.report.issue_markdown import issues_markdown

    if not markdown:
        raise UsageError("--out writes the issues of --markdown; add --markdown")
    if as_json:
        raise UsageError("give --markdown or --json, not both")
    if out_dir is not None and out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out {out_dir} is a file; name a directory to write the issues into")
    with workspace(repo, target) as ws:
        issues = regression_issues(ws, only_open)
    if not issues:
        click.echo(f"no {'open ' if only_open else ''}regression stored; nothing to write", err=True)
    elif out_dir is None:
        click.echo(issues_markdown(issues), nl=False)
    else:
        try:
            written = write_issues(issues, out_dir)
        except OSError as exc:
            raise UsageError(f"cannot write into --out {out_dir} ({exc.strerror}); pass another directory") from None
        click.echo("\n".join(map(str, written)))


@click.command()
@click.option("--probe", "probe_name", help="Only this probe.")
@click.option("--range", "range_spec", help="Only commits of this first-parent range (A..B, or B).")
@click.option("--since", type=click.DateTime(), help="Only runs started at or after this time (UTC).")
@click.option("--until", type=click.DateTime(), help="Only runs started at or before this time (UTC).")
@click.option(
    "--env",
    "environment",
    help="Only runs in this environment: a fingerprint prefix or part of the GPU name (cpu for none).",
)
@click.option("--outcome", type=click.Choice([o.value for o in Outcome]), help="Only runs with this outcome.")
@click.option(
    "--tolerance",
    type=click.FloatRange(min=0),
    help="Re-derive verdicts from stored metrics with this relative-error bound.",
)
@click.option("--abs-tolerance", type=click.FloatRange(min=0), help="With --tolerance: also bound the max abs error.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1), help="Newest runs to show.")
@target_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def history(
    probe_name: str | None,
    range_spec: str | None,
    since: datetime | None,
    until: datetime | None,
    environment: str | None,
    outcome: str | None,
    tolerance: float | None,
    abs_tolerance: float | None,
    limit: int,
    repo: Path | None,
    target: str | None,
    as_json: bool,
) -> None:
    """Stored probe runs, newest first, filtered, each with the reason it failed or could not be
    judged; nothing is run. A --probe or --env that names nothing stored is exit 2.

    With --range, a run measured outside the range at a target tree of the range is listed under
    the range's first commit with that tree, marked "measured at X, same tree"; a result copied
    from another tree by read reuse is marked "measured at X, same files read"."""
    wanted = RunFilter(probe_name, outcome, _utc(since), _utc(until), environment)
    with workspace(repo, target) as ws:
        found = history_runs(ws, wanted, range_spec, limit)
    rederived = (
        {r.id: verdict_under(r, parse_tolerance(tolerance, abs_tolerance)) for r in found.runs}
        if tolerance is not None
        else None
    )
    if as_json:
        emit_json({"runs": [render.run_json(r, found, rederived) for r in found.runs]})
    else:
        out.print(render.runs_table(found, "stored runs, newest first", out.width, rederived))


def _utc(moment: datetime | None) -> datetime | None:
    return moment.replace(tzinfo=UTC) if moment is not None and moment.tzinfo is None else moment


@click.command()
@click.argument("rev")
@click.option(
    "--output",
    "with_output",
    is_flag=True,
    help="Print each run's kept output (a command's last lines, a probe's detail) instead of the table.",
)
@target_options
@click.option(
    "--json", "as_json", is_flag=True, help="Print JSON (every run carries its whole signature and output as detail)."
)
def show(rev: str, with_output: bool, repo: Path | None, target: str | None, as_json: bool) -> None:
    """Everything stored about REV: its commit and every probe run of it with the reason it failed
    or could not be judged, including the runs measured at another commit with the same target
    tree (marked "measured at X, same tree") or copied by read reuse ("measured at X, same files read")."""
    with workspace(repo, target) as ws:
        commit, found = runs_at(ws, rev)
    if as_json:
        emit_json({"commit": render.commit_json(commit), "runs": [render.run_json(r, found) for r in found.runs]})
        return
    out.print(render.commit_header(commit))
    if not found.runs:
        out.print("no stored runs; measure it with `regtrack run`")
    elif with_output:
        out.print(render.run_outputs(found), soft_wrap=True)
    else:
        out.print(render.runs_table(found, f"runs of {commit.sha[:12]}", out.width))


@click.command()
@click.option(
    "--html",
    "html_path",
    type=click.Path(path_type=Path),
    help="The page to write: one self-contained HTML file.",
)
@click.option("--range", "range_spec", help="First-parent range to show (A..B, or B; default: the target's branch).")
@click.option(
    "--probe", "probe_names", multiple=True, help="Probe to show, as stored (repeatable; default: the target's probes)."
)
@click.option(
    "--env",
    "environment",
    help="Only runs in this environment: a fingerprint prefix or part of the GPU name (cpu for none).",
)
@target_options
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the report's content as one compact JSON object (its schema: tracker/report/report.schema.json).",
)
def report(
    html_path: Path | None,
    range_spec: str | None,
    probe_names: tuple[str, ...],
    environment: str | None,
    repo: Path | None,
    target: str | None,
    as_json: bool,
) -> None:
    """Write an HTML report of the stored results along the first-parent line (--html), print it
    as JSON (--json), or both; nothing is run. A --probe or --env that names nothing stored is exit 2."""
    from tracker.report.html import render_html
    from tracker.report.json_report import report_json
    from tracker.reporting import build_report  # only this command pays for the report's modules

    if html_path is None and not as_json:
        raise UsageError("nothing to write; pass --html FILE for the page, --json for JSON on stdout, or both")
    if html_path is not None:
        _check_writable(html_path)
    with workspace(repo, target) as ws:
        data = build_report(ws, range_spec, probe_names, environment)
    if html_path is not None:
        _write_atomically(html_path, render_html(data))
        counts = f"{len(data.commits)} commits, {len(data.probes)} probes, {len(data.transitions)} transitions"
        click.echo(f"wrote {html_path}: {counts}", err=as_json)
    if as_json:
        click.echo(json.dumps(report_json(data), separators=(",", ":")))


def _check_writable(path: Path) -> None:
    """Fail before the work, not after it."""
    if path.is_dir():
        raise UsageError(f"--html {path} is a directory; name a file, e.g. {path / 'report.html'}")
    if not path.parent.is_dir():
        raise UsageError(
            f"cannot write {path}: directory {path.parent} does not exist; create it or pass another --html"
        )


def _write_atomically(path: Path, text: str) -> None:
    """Through a temporary file in the same directory and a rename: a reader sees the old page or the new one."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(text, encoding="utf-8")
        temporary.replace(path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise UsageError(
            f"cannot write {path} ({exc.strerror}); check its directory's permissions or pass another --html"
        ) from None
