"""Housekeeping commands: gc, db upgrade, init, and the demo."""

from __future__ import annotations

import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from tracker.cli import progress, render
from tracker.cli.app import (
    emit_json,
    err,
    execution_options,
    execution_settings,
    out,
    workspace,
)
from tracker.core.errors import UsageError
from tracker.targets.snapshots import SnapshotCache
from tracker.targets.templates import DEVICES, TEMPLATES, config_text, write_init

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


@click.command()
@click.option(
    "--max-size",
    default="10G",
    show_default=True,
    type=Quantity("size", SIZE_UNITS, "10G or 500M"),
    help="Keep the snapshot cache under this size, removing the least recently used first.",
)
@click.option(
    "--max-age",
    default="30d",
    show_default=True,
    type=Quantity("age", AGE_UNITS, "30d or 12h"),
    help="Remove snapshots unused for longer.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def gc(max_size: float, max_age: float, as_json: bool) -> None:
    """Clean the snapshot cache: interrupted extractions, and snapshots past the bounds. A snapshot
    used within the last hour is kept (another process may be probing it)."""
    cache = SnapshotCache()
    try:
        report = cache.gc(int(max_size), max_age)
    except OSError as error:
        culprit = f" ({error.filename})" if error.filename else ""
        raise UsageError(
            f"cannot clean the snapshot cache {cache.root}: {error.strerror or error}{culprit}; "
            "make it writable, or set REGTRACK_HOME to the home whose cache to clean"
        ) from None
    if as_json:
        emit_json({"cache": str(cache.root), **asdict(report)})
    else:
        out.print(f"{cache.root}: {report}")


@click.command()
@click.argument("words", metavar="[NAME] [PATH]", nargs=-1)
@click.option("--print", "to_stdout", is_flag=True, help="Print the configuration instead of writing it.")
@click.option(
    "--device",
    type=click.Choice(DEVICES),
    help="Where the template's probes will run: cuda lists the GPU-only probes too (default: cpu).",
)
def init(words: tuple[str, ...], to_stdout: bool, device: str | None) -> None:
    """Write a regtrack.toml into PATH (default: here): for a known repository NAME
    (sglang), or a commented starter for any repository."""
    name = words[0] if words and words[0] in TEMPLATES else None
    rest = words[1:] if name is not None else words
    if len(rest) > 1:
        raise UsageError(
            f"init takes at most a template name and a path, not {' '.join(words)}; "
            f"known templates: {', '.join(TEMPLATES)}"
        )
    path = Path(rest[0]) if rest else Path(".")
    if to_stdout:
        click.echo(config_text(name, path, device), nl=False)
        return
    out.print(f"wrote {write_init(name, path, device)}")


@click.group()
def db() -> None:
    """The results database."""


@db.command()
@click.option("--url", help="SQLAlchemy URL (default: REGTRACK_DB_URL, else the file in the data directory).")
def upgrade(url: str | None) -> None:
    """Migrate the database to the newest schema."""
    from db.store import upgrade as upgrade_database

    upgrade_database(url)
    out.print("database is at the newest schema")


@click.command()
@click.argument("path", required=False, type=click.Path(path_type=Path))
@click.option("--commits", default=150, show_default=True, type=click.IntRange(60), help="First-parent commits.")
@execution_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def demo(path: Path | None, commits: int, as_json: bool, **execution: Any) -> None:
    """Build the demo history and tell its story: scan it, show each probe's verdict on its key
    commits, bisect its stories and check each culprit, and write the report with its plots."""
    from tracker.demo import walkthrough as demo_api

    options = execution_settings(**execution)
    history_path = path or demo_api.default_path()
    manifest = demo_api.ensure_history(history_path, commits, err)
    with (
        workspace(history_path, None) as ws,
        options.executor(ws.config.executor) as executor,
        progress.Reporter(err, "demo") as reporter,
    ):
        result = demo_api.run_demo(ws, manifest, executor, options.seed, progress.Watcher(reporter, options.workers))
    if as_json:
        emit_json(result.to_json())
        return
    if result.scan is not None:
        out.print(render.scan_summary(result.scan))
    out.print(render.demo_verdicts(result))
    for report in result.bisects:
        out.print(render.bisect_summary(report))
    out.print(f"\nthe report: {result.report}")
    out.print("next:")
    for command in result.next_commands:
        out.print(f"  {command}")
