"""``regtrack compare A B``: parses, calls ``tracker.compare.compare`` and renders what it returns."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

import tracker.probing as api
from tracker.cli import progress, render
from tracker.cli.app import emit_json, err, execution_options, execution_settings, out, target_options
from tracker.cli.probing import probe_selection
from tracker.compare import compare as compare_revisions


@click.command()
@click.argument("a")
@click.argument("b")
@probe_selection("compare with")
@target_options
@execution_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def compare(
    a: str,
    b: str,
    probe_names: tuple[str, ...],
    command: str | None,
    fresh: bool,
    repo: Path | None,
    target: str | None,
    as_json: bool,
    **execution: Any,
) -> None:
    """Each probe and case at revisions A and B side by side: outcomes, every metric with the ratio
    B/A, and whether each result was measured now or reused from the store; what got worse first.
    Exit 1 when something that passed at A fails at B, else 0."""
    options = execution_settings(**execution)
    selection = api.Selection(repo, target, probe_names, command, fresh)
    with progress.Reporter(err, "compare") as reporter:
        comparison = compare_revisions(selection, a, b, options, progress.Watcher(reporter))
    if as_json:
        emit_json(comparison.to_json())
    else:
        out.print(render.comparison_view(comparison))
    sys.exit(comparison.exit_status)
