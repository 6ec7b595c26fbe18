"""A target's ``probes``: a list of probe names, or a table of probe tables.

    probes = ["target_verify_metadata", "mylib_attention"]     # built-in, installed or registered

    [targets.T.probes.verify]                                   # a module of the work tree
    module = "ci/probes.py:verify"
    [targets.T.probes.attention]                                # a command, run in the snapshot
    command = ["python", "-m", "pytest", "-x", "tests/test_attn.py"]
    inputs = ["ci/conftest_extra.py"]                          # work-tree files hashed into its version
    reads = ["tests/test_attn.py", "src/attn"]                 # revision paths its result depends on
    [targets.T.probes.target_verify_metadata]                   # an empty table: a probe known by name

Names are checked without importing anything when they can be (built-ins, entry points); only a
name found nowhere else makes ``$REGTRACK_PROBE_MODULES`` and the module entry points load.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from probes.registry import ProbeLoadError, get_probe, known_names
from probes.sources import ProbeSpec, Source, split_command
from tracker.core.errors import UsageError

PROBE_KEYS = ("module", "command", "inputs", "reads", "version")
IMPORTABLE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*(:[A-Za-z_]\w*)?")
FILE_ATTR = re.compile(r".+\.py(:[A-Za-z_]\w*)?")


def parse_probes(file: Path, key: str, value: object, repo: Path) -> tuple[tuple[str, ...], dict[str, ProbeSpec]]:
    """The target's probe names, in order, and the specs of those its tables configure."""
    if isinstance(value, list):
        if not all(isinstance(item, str) for item in value):
            raise UsageError(f"{file}: {key} must be a list of probe names or a table of [{key}.NAME] tables")
        if not value:
            raise UsageError(f"{file}: {key} is empty; list at least one probe or leave the key out for all of them")
        names = tuple(dict.fromkeys(value))
        for name in names:
            _check_known(file, key, name, {}, in_table=False)
        return names, {}
    if not isinstance(value, dict):
        raise UsageError(f"{file}: {key} must be a list of probe names or a table of [{key}.NAME] tables")
    if not value:
        raise UsageError(f"{file}: {key} is empty; add a [{key}.NAME] table or leave the key out for all probes")
    specs = {}
    for name, table in value.items():
        spec = _parse_table(file, f"{key}.{name}", name, table, repo)
        if spec is not None:
            specs[name] = spec
    for name in value:
        if name not in specs:
            _check_known(file, f"{key}.{name}", name, specs, in_table=True)
    return tuple(value), specs


def _parse_table(file: Path, key: str, name: str, table: object, repo: Path) -> ProbeSpec | None:
    """The spec of a module or command table; None for an empty table (a probe known by name)."""
    if not isinstance(table, dict):
        raise UsageError(f'{file}: {key} must be a table; write it as [{key}] with module = "FILE.py:ATTR" or command = [...]')
    for entry in table:
        if entry not in PROBE_KEYS:
            raise UsageError(f"{file}: unknown key {key}.{entry}; known keys here: {', '.join(PROBE_KEYS)}")
    if "module" in table and "command" in table:
        raise UsageError(f"{file}: {key} has both module and command; keep the one that runs the probe")
    if "module" not in table and "command" not in table:
        if table:
            raise UsageError(f"{file}: {key} sets {', '.join(table)} without module or command; add one of them")
        return None
    inputs = _inputs(file, key, table.get("inputs", []), repo)
    version = _version(file, key, table.get("version"))
    if "reads" in table and "command" not in table:
        raise UsageError(f"{file}: {key}.reads is for a command; a module probe's reads are traced, leave the key out")
    if "command" in table:
        argv = _command(file, key, table["command"])
        reads = _reads(file, key, table["reads"]) if "reads" in table else ()
        return ProbeSpec(name, Source.COMMAND, command=tuple(argv), inputs=inputs, reads=reads, base=str(repo), version=version)
    return ProbeSpec(name, Source.MODULE, module=_module(file, key, table["module"], repo), inputs=inputs, base=str(repo), version=version)


def _command(file: Path, key: str, value: object) -> list[str]:
    return command_line(file, f"{key}.command", value, '["sh", "check.sh"]', "name the program to run")


def command_line(file: Path, key: str, value: object, example: str, when_empty: str) -> list[str]:
    """A config's command line: a list of words, or one string split like a shell would (never run
    through one)."""
    if isinstance(value, str):
        try:
            argv = split_command(value)
        except ValueError as error:
            raise UsageError(f"{file}: {key} cannot be split like a shell would ({error}); balance its quotes") from None
    elif isinstance(value, list) and all(isinstance(word, str) for word in value):
        argv = list(value)
    else:
        raise UsageError(f"{file}: {key} must be a command line: a list of strings such as {example}, or one string")
    if not argv or not argv[0]:
        raise UsageError(f"{file}: {key} is empty; {when_empty}")
    return argv


def _module(file: Path, key: str, value: object, repo: Path) -> str:
    if not isinstance(value, str) or not (FILE_ATTR.fullmatch(value) or IMPORTABLE.fullmatch(value)):
        raise UsageError(f'{file}: {key}.module must be "FILE.py[:ATTR]" (relative to the repository) or "package.module[:ATTR]"')
    where = value.partition(":")[0] if FILE_ATTR.fullmatch(value) else ""
    if where:
        _check_file(file, f"{key}.module", where, repo)
    return value


def _inputs(file: Path, key: str, value: object, repo: Path) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise UsageError(f'{file}: {key}.inputs must be a list of file paths such as ["ci/check.sh"]')
    for name in value:
        _check_file(file, f"{key}.inputs", name, repo)
    return tuple(dict.fromkeys(value))


def _reads(file: Path, key: str, value: object) -> tuple[str, ...]:
    """Paths of the revision (files or directories) a command's result depends on."""
    if not isinstance(value, list) or not value or not all(isinstance(item, str) for item in value):
        raise UsageError(f'{file}: {key}.reads must be a non-empty list of paths of the revision such as ["src", "check.sh"]')
    for name in value:
        path = PurePosixPath(name)
        if not name.strip("/") or path.is_absolute() or ".." in path.parts:
            raise UsageError(f"{file}: {key}.reads names {name!r}, which is not a path inside the repository; give it relative to the repository's root")
    return tuple(dict.fromkeys(name.strip("/") for name in value))


def _check_file(file: Path, key: str, name: str, repo: Path) -> None:
    path = PurePosixPath(name)
    if not name or path.is_absolute() or ".." in path.parts:
        raise UsageError(f"{file}: {key} names {name!r}, which is not a path inside the repository; give it relative to {repo}")
    if not (repo / path).is_file():
        raise UsageError(f"{file}: {key} names {name!r}, which is not a file in {repo}; fix the path (relative to the repository)")


def _version(file: Path, key: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{file}: {key}.version must be a positive integer; bump it when the probe's meaning changes")
    return value


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
                f'{file}: {key} has neither module nor command and no probe is called {name!r} (known probes: {known}); '
                'set module = "FILE.py:ATTR" or command = [...]'
            ) from None
        raise UsageError(f"{file}: {key} names unknown probe {name!r}; known probes: {known}") from None
    except ProbeLoadError as error:
        raise UsageError(f"{file}: {key}: {error}") from None
