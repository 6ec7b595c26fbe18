"""The ``regtrack`` command line: parses options, calls the Python API, prints.

The group, its shared options and error handling; the commands live in probing, queries and
maintenance, each loaded when it is asked for (``COMMANDS``). Exit codes are
``tracker.core.exits``: 0 ok, 1 a probe failed or a regression was found, 2 bad usage or input,
3 (run and track) nothing failed but a commit asked about could not be judged by any probe.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from click.core import ParameterSource
from rich.console import Console

from tracker.core.errors import UsageError
from tracker.core.exits import ExitStatus
from tracker.core.json_schema import versioned
from tracker.workspace import ExecutionOptions, Workspace

F = TypeVar("F", bound=Callable[..., Any])
DTYPES = ("float32", "bfloat16", "float16", "float64")
DEVICE = re.compile(r"cpu|cuda(:\d+)?")
out = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, highlight=False)


def target_options(command: F) -> F:
    repo_help = "Repository to work on (default: the one around the current directory)."
    command = click.option("--repo", type=click.Path(path_type=Path), help=repo_help)(command)
    return click.option("--target", help="Target from regtrack.toml (default: the only one).")(command)


def execution_options(command: F) -> F:
    options = [
        click.option("--device", default="cpu", show_default=True, callback=_check_device, help="cpu, cuda or cuda:N."),
        click.option(
            "--dtype", type=click.Choice(DTYPES), help="Probe dtype (default: float32 on cpu, bfloat16 on cuda)."
        ),
        click.option("--workers", default=1, show_default=True, type=click.IntRange(1), help="Probe worker processes."),
        click.option(
            "--timeout",
            type=click.FloatRange(min=0.1),
            help="Seconds one probe case may take (default: the target's timeout, else 300).",
        ),
        click.option("--seed", type=int, help="Fix the probes' seed (default: a fresh one per execution, stored)."),
        click.option(
            "--executor",
            "executor_kind",
            type=click.Choice(("local", "ray")),
            help="Where probe jobs run (default: the config's [executor], else local).",
        ),
        click.option(
            "--ray-address", help="Ray cluster to join with --executor ray (default: RAY_ADDRESS, else a local one)."
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _check_device(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if not DEVICE.fullmatch(value):
        raise click.BadParameter(f"{value!r} is not a device; use cpu, cuda or cuda:N")
    return value


def execution_settings(
    device: str,
    dtype: str | None,
    workers: int,
    timeout: float | None,
    seed: int | None,
    executor_kind: str | None,
    ray_address: str | None,
) -> ExecutionOptions:
    if ray_address is not None and executor_kind == "local":
        raise UsageError("--ray-address names a Ray cluster, which --executor local does not use; drop one of them")
    if ray_address is not None:
        executor_kind = "ray"
    return ExecutionOptions(device, dtype, workers, timeout, seed, executor_kind, ray_address)


EXECUTION_FLAGS = {
    "device": "--device",
    "dtype": "--dtype",
    "workers": "--workers",
    "timeout": "--timeout",
    "seed": "--seed",
    "executor_kind": "--executor",
    "ray_address": "--ray-address",
}
SEARCH_FLAGS = {
    "strategy": "--strategy",
    "confidence": "--confidence",
    "max_runs": "--max-runs",
    "find_fix": "--find-fix",
    "assume_ends": "--assume-ends",
}


def given_with_resume(ctx: click.Context) -> list[str]:
    """The search and execution flags typed on a ``--resume`` command line: a resumed session keeps its own."""
    flags = {**SEARCH_FLAGS, **EXECUTION_FLAGS, "fresh": "--fresh"}
    return [flag for name, flag in flags.items() if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE]


def workspace(repo: Path | None, target: str | None) -> Workspace:
    """The workspace a command works on, closed when its ``with`` block ends."""
    return Workspace.open(repo, target)


COMMANDS = {
    "bisect": "tracker.cli.probing:bisect",
    "compare": "tracker.cli.compare:compare",
    "run": "tracker.cli.probing:run",
    "scan": "tracker.cli.probing:scan",
    "track": "tracker.cli.probing:track",
    "history": "tracker.cli.queries:history",
    "regressions": "tracker.cli.queries:regressions",
    "report": "tracker.cli.queries:report",
    "show": "tracker.cli.queries:show",
    "db": "tracker.cli.maintenance:db",
    "demo": "tracker.cli.maintenance:demo",
    "gc": "tracker.cli.maintenance:gc",
    "init": "tracker.cli.maintenance:init",
}
"""Each command and where it is defined, as ``module:attribute``: a command imports only its own
module (a query need not load the bisect and scan machinery), ``--help`` all of them."""


class LazyGroup(click.Group):
    """Click's lazily loading group: ``lazy_subcommands`` maps a command's name to the
    ``module:attribute`` that defines it, imported when the command is asked for."""

    def __init__(self, *args: Any, lazy_subcommands: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_subcommands = lazy_subcommands or {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy_subcommands])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy_subcommands:
            return self._lazy_load(cmd_name)
        return super().get_command(ctx, cmd_name)

    def _lazy_load(self, cmd_name: str) -> click.Command:
        module_name, attribute = self.lazy_subcommands[cmd_name].split(":")
        command = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(command, click.Command):
            raise ValueError(f"{self.lazy_subcommands[cmd_name]} is not a click command")
        return command


class RegtrackGroup(LazyGroup):
    """Turns a ``UsageError`` into one line on stderr and exit code 2."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[JSON_ASKED] = JSON_FLAG in args[: args.index("--")] if "--" in args else JSON_FLAG in args
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except UsageError as error:
            _json_error(ctx, str(error))
            click.echo(f"regtrack: error: {error}", err=True)
            sys.exit(ExitStatus.USAGE)
        except click.ClickException as error:
            _json_error(ctx, error.format_message(), error.exit_code)
            raise
        except KeyboardInterrupt:
            click.echo("regtrack: interrupted; finished results are stored (resume a bisect with --resume)", err=True)
            sys.exit(ExitStatus.INTERRUPTED)


JSON_FLAG = "--json"
JSON_ASKED = "regtrack.json_asked"


def _json_error(ctx: click.Context, message: str, exit_code: int = ExitStatus.USAGE) -> None:
    """Where ``--json`` was asked for, the error as a JSON object on stdout too, so a program that
    reads stdout gets an answer."""
    if ctx.meta.get(JSON_ASKED):
        emit_json({"error": message, "exit_code": int(exit_code)})


@click.group(cls=RegtrackGroup, lazy_subcommands=COMMANDS)
@click.version_option(package_name="regtrack")
def main() -> None:
    """Regression tracking and bisect automation for GPU attention backends."""


def emit_json(data: dict[str, Any]) -> None:
    """One JSON object on stdout, carrying the ``schema`` version as every JSON output of regtrack does."""
    click.echo(json.dumps(versioned(data), indent=2, default=str))
