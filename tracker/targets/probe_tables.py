"""A target's ``probes``: a list of probe names, or a table of probe tables.

    probes = ["target_verify_metadata", "mylib_attention"]     # built-in, installed or registered

    [targets.T.probes.verify]                                   # a module of the work tree
    module = "ci/probes.py:verify"
    [targets.T.probes.attention]                                # a command, run in the snapshot
    command = ["python", "-m", "pytest", "-x", "tests/test_attn.py"]
    inputs = ["ci/conftest_extra.py"]                          # work-tree files hashed into its version
    reads = ["tests/test_attn.py", "src/attn"]                 # revision paths its result depends on
    [targets.T.probes.target_verify_metadata]                   # an empty table: a probe known by name
    [targets.T.probes.latency]                                  # a command that measures: $REGTRACK_REPEAT
    command = ["python", "ci/time_decode.py"]                   # samples of each metric, written as
    metrics = [{ name = "decode_us", unit = "us" }]             # {"samples": {"decode_us": [...]}}
    repeat = 20                                                 # to $REGTRACK_METRICS

Names are checked without importing anything when they can be (built-ins, entry points); only a
name found nowhere else makes ``$REGTRACK_PROBE_MODULES`` and the module entry points load.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Annotated

import msgspec
from msgspec import Meta

from probes.registry import ProbeLoadError, get_probe, known_names
from probes.sources import ProbeSpec, Source, split_command
from tracker.core.errors import UsageError
from tracker.core.metrics import Direction, Metric

FILE_ATTR = re.compile(r".+\.py(:[A-Za-z_]\w*)?")
MODULE = r"^(?:.+\.py(:[A-Za-z_]\w*)?|[A-Za-z_]\w*(\.[A-Za-z_]\w*)*(:[A-Za-z_]\w*)?)\Z"
COMMAND_LINE = "must be a command line: a list of strings such as {example}, or one string"

ModuleName = Annotated[
    str,
    Meta(
        pattern=MODULE,
        description='must be "FILE.py[:ATTR]" (relative to the repository) or "package.module[:ATTR]"',
    ),
]
CommandLine = Annotated[str | list[str], Meta(description=COMMAND_LINE.format(example='["sh", "check.sh"]'))]
InputFiles = Annotated[list[str], Meta(description='must be a list of file paths such as ["ci/check.sh"]')]
ReadPaths = Annotated[
    list[str],
    Meta(min_length=1, description='must be a non-empty list of paths of the revision such as ["src", "check.sh"]'),
]
Version = Annotated[int, Meta(ge=1, description="must be a positive integer; bump it when the probe's meaning changes")]
Repeat = Annotated[int, Meta(ge=1, le=10_000, description="must be a whole number of samples from 1 to 10000")]


class MetricTable(msgspec.Struct, forbid_unknown_fields=True):
    """One declared metric: ``{ name = "decode_us", unit = "us", direction = "lower" }``."""

    name: Annotated[str, Meta(pattern=r"^[A-Za-z_][\w.]*\Z", description="must be a name such as decode_us")]
    unit: Annotated[str, Meta(min_length=1, description='must name the unit, such as "us"')]
    direction: Annotated[
        str, Meta(pattern="^(lower|higher)\\Z", description='must be "lower" or "higher" (is better)')
    ] = "lower"


class ProbeTable(msgspec.Struct, forbid_unknown_fields=True):
    """A ``[targets.T.probes.NAME]`` table as written: a module or a command, or empty for a known name."""

    module: ModuleName | None = None
    command: CommandLine | None = None
    inputs: InputFiles | None = None
    reads: ReadPaths | None = None
    version: Version | None = None
    metrics: (
        Annotated[list[MetricTable], Meta(min_length=1, description="must be a non-empty list of metric tables")] | None
    ) = None
    repeat: Repeat | None = None


TableOfProbe = Annotated[
    ProbeTable, Meta(description='must be a table; write it as [{key}] with module = "FILE.py:ATTR" or command = [...]')
]
ProbeTables = Annotated[
    list[str] | dict[str, TableOfProbe],
    Meta(description="must be a list of probe names or a table of [{key}.NAME] tables"),
]
"""The ``probes`` key of a target: probe names, or probe tables by name."""


def parse_probes(
    file: Path, key: str, value: list[str] | dict[str, ProbeTable], repo: Path
) -> tuple[tuple[str, ...], dict[str, ProbeSpec]]:
    """The target's probe names, in order, and the specs of those its tables configure."""
    if isinstance(value, list):
        if not value:
            raise UsageError(f"{file}: {key} is empty; list at least one probe or leave the key out for all of them")
        names = tuple(dict.fromkeys(value))
        for name in names:
            _check_known(file, key, name, {}, in_table=False)
        return names, {}
    if not value:
        raise UsageError(f"{file}: {key} is empty; add a [{key}.NAME] table or leave the key out for all probes")
    specs = {}
    for name, table in value.items():
        spec = _spec(file, f"{key}.{name}", name, table, repo)
        if spec is not None:
            specs[name] = spec
    for name in value:
        if name not in specs:
            _check_known(file, f"{key}.{name}", name, specs, in_table=True)
    return tuple(value), specs


def _spec(file: Path, key: str, name: str, table: ProbeTable, repo: Path) -> ProbeSpec | None:
    """The spec of a module or command table; None for an empty table (a probe known by name)."""
    if table.module is not None and table.command is not None:
        raise UsageError(f"{file}: {key} has both module and command; keep the one that runs the probe")
    if table.module is None and table.command is None:
        given = [field for field in table.__struct_fields__ if getattr(table, field) is not None]
        if given:
            raise UsageError(f"{file}: {key} sets {', '.join(given)} without module or command; add one of them")
        return None
    inputs = _inputs(file, key, table.inputs or [], repo)
    if table.command is None:
        if table.metrics is not None or table.repeat is not None:
            raise UsageError(
                f"{file}: {key} declares metrics for a module probe; its Probe declares them "
                "(Probe(metrics=..., repeat=...)), leave the keys out"
            )
        if table.reads is not None:
            raise UsageError(
                f"{file}: {key}.reads is for a command; a module probe's reads are traced, leave the key out"
            )
        module = _module(file, key, table.module or "", repo)
        return ProbeSpec(name, Source.MODULE, module=module, inputs=inputs, base=str(repo), version=table.version)
    argv = tuple(command_line(file, f"{key}.command", table.command, "name the program to run"))
    reads = _reads(file, key, table.reads) if table.reads is not None else ()
    metrics = _metrics(file, key, table)
    return ProbeSpec(
        name,
        Source.COMMAND,
        command=argv,
        inputs=inputs,
        reads=reads,
        base=str(repo),
        version=table.version,
        metrics=metrics,
        repeat=table.repeat or 1,
    )


def _metrics(file: Path, key: str, table: ProbeTable) -> tuple[Metric, ...]:
    """A command's declared metrics; ``repeat`` means nothing without them."""
    if table.metrics is None:
        if table.repeat is not None:
            raise UsageError(f"{file}: {key}.repeat counts samples of metrics; declare metrics = [...] or leave it out")
        return ()
    names = [metric.name for metric in table.metrics]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise UsageError(f"{file}: {key}.metrics declares {', '.join(twice)} more than once; keep one of each")
    return tuple(Metric(m.name, m.unit, Direction(m.direction)) for m in table.metrics)


def command_line(file: Path, key: str, value: str | list[str], when_empty: str) -> list[str]:
    """A config's command line: a list of words, or one string split like a shell would (never run
    through one)."""
    if isinstance(value, str):
        try:
            argv = split_command(value)
        except ValueError as error:
            raise UsageError(
                f"{file}: {key} cannot be split like a shell would ({error}); balance its quotes"
            ) from None
    else:
        argv = list(value)
    if not argv or not argv[0]:
        raise UsageError(f"{file}: {key} is empty; {when_empty}")
    return argv


def _module(file: Path, key: str, value: str, repo: Path) -> str:
    if FILE_ATTR.fullmatch(value):
        _check_file(file, f"{key}.module", value.partition(":")[0], repo)
    return value


def _inputs(file: Path, key: str, value: list[str], repo: Path) -> tuple[str, ...]:
    for name in value:
        _check_file(file, f"{key}.inputs", name, repo)
    return tuple(dict.fromkeys(value))


def _reads(file: Path, key: str, value: list[str]) -> tuple[str, ...]:
    """Paths of the revision (files or directories) a command's result depends on."""
    for name in value:
        path = PurePosixPath(name)
        if not name.strip("/") or path.is_absolute() or ".." in path.parts:
            raise UsageError(
                f"{file}: {key}.reads names {name!r}, which is not a path inside the repository; "
                "give it relative to the repository's root"
            )
    return tuple(dict.fromkeys(name.strip("/") for name in value))


def _check_file(file: Path, key: str, name: str, repo: Path) -> None:
    path = PurePosixPath(name)
    if not name or path.is_absolute() or ".." in path.parts:
        raise UsageError(
            f"{file}: {key} names {name!r}, which is not a path inside the repository; give it relative to {repo}"
        )
    if not (repo / path).is_file():
        raise UsageError(
            f"{file}: {key} names {name!r}, which is not a file in {repo}; fix the path (relative to the repository)"
        )


def _check_known(file: Path, key: str, name: str, configured: Mapping[str, ProbeSpec], in_table: bool) -> None:
    """A name that is not configured must be a built-in, installed or registered probe."""
    if name in configured or name in known_names():
        return
    try:
        get_probe(name)
    except KeyError:
        known = ", ".join(dict.fromkeys([*configured, *known_names()]))
        if in_table:
            raise UsageError(
                f"{file}: {key} has neither module nor command and no probe is called {name!r} "
                f'(known probes: {known}); set module = "FILE.py:ATTR" or command = [...]'
            ) from None
        raise UsageError(f"{file}: {key} names unknown probe {name!r}; known probes: {known}") from None
    except ProbeLoadError as error:
        raise UsageError(f"{file}: {key}: {error}") from None
