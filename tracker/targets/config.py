"""Targets from ``regtrack.toml`` or ``[tool.regtrack]`` in ``pyproject.toml``, found like git finds its repository.

The file's tables are msgspec models (``ConfigFile``, ``TargetTable``, ``ExecutorConfig``) that check
types, ranges and unknown keys; what needs the file system or the other keys (paths, import roots,
probes, command lines) is checked as each table becomes a ``Target``.
"""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from probes.api import DEFAULT_IMPORT_ROOTS
from probes.sources import ProbeSpec
from tracker.core.errors import UsageError
from tracker.targets.probe_tables import COMMAND_LINE, ProbeTables, command_line, parse_probes
from tracker.targets.revisions import ROOT_PATH
from tracker.targets.table_model import convert

CONFIG_FILE = "regtrack.toml"
PYPROJECT = "pyproject.toml"
DEFAULT_TARGET = "default"
DEFAULT_BRANCH = "main"

Strings = Annotated[list[str], Meta(description="must be a list of strings")]
RepoPath = Annotated[str, Meta(min_length=1, description='must be a path string such as "."')]
Branch = Annotated[str, Meta(min_length=1, description='must be a branch name such as "main"')]
SetupCommand = Annotated[str | list[str], Meta(description=COMMAND_LINE.format(example='["make", "build"]'))]
Seconds = Annotated[
    float, Meta(gt=0, le=sys.float_info.max, description="must be a number of seconds above 0, such as 600")
]
TABLE_OF_STRINGS = "must be a table of strings; write it as [{key}] with lines such as "
StringTable = dict[str, Annotated[str, Meta(description='must be a string; quote it, as in {name} = "{value}"')]]
Environment = Annotated[StringTable, Meta(description=TABLE_OF_STRINGS + 'CUDA_HOME = "/usr/local/cuda"')]
Facts = Annotated[StringTable, Meta(description=TABLE_OF_STRINGS + 'cluster = "h200-pool"')]
ExecutorKind = Annotated[Literal["local", "ray"], Meta(description="must be one of local, ray, not {value!r}")]
RayAddress = Annotated[str, Meta(description='must be a string such as "auto" or "ray://head:10001"')]
GpuShare = Annotated[float, Meta(ge=0, le=1, description="must be a number from 0 to 1 (a GPU or a share of one)")]
DbUrl = Annotated[str, Meta(description='must be a string such as "sqlite:///path/regtrack.db"')]


class TargetTable(msgspec.Struct, forbid_unknown_fields=True):
    """A ``[targets.NAME]`` table as written; ``Target`` is what it means once resolved."""

    repo: RepoPath | None = None
    paths: Strings | None = None
    probes: ProbeTables | None = None
    branch: Branch = DEFAULT_BRANCH
    import_roots: Strings | None = None
    setup: SetupCommand | None = None
    env: Environment = {}
    timeout: Seconds | None = None
    facts: Facts = {}


TargetTables = Annotated[
    dict[str, TargetTable], Meta(min_length=1, description="is missing; add a [{key}.NAME] table with repo = PATH")
]


class ExecutorConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The ``[executor]`` table: where probe jobs run unless ``--executor`` says otherwise."""

    kind: ExecutorKind = "local"
    ray_address: RayAddress | None = None
    gpus_per_actor: GpuShare | None = None
    """What each Ray actor asks for: one GPU, or a fraction to share one; None: 1 on cuda, 0 on cpu."""


class ConfigFile(msgspec.Struct, forbid_unknown_fields=True):
    """The whole file (or ``[tool.regtrack]``) as written."""

    targets: TargetTables
    db_url: DbUrl | None = None
    executor: ExecutorConfig = ExecutorConfig()


@dataclass
class Target:
    """A target as the commands use it: its repository resolved and its probe tables turned into specs."""

    name: str
    repo: Path
    paths: tuple[str, ...] = (ROOT_PATH,)
    """The paths whose change can change a probe's result; the whole repository unless the config narrows it."""
    probes: tuple[str, ...] = ()
    """Empty for a repository without a config, or a target that lists none: a command then needs
    ``--command`` or ``--probe``."""
    branch: str = DEFAULT_BRANCH
    probe_specs: Mapping[str, ProbeSpec] = field(default_factory=dict)
    """The probes its ``[...probes.NAME]`` tables configure (modules, commands), by name."""
    import_roots: tuple[str, ...] = DEFAULT_IMPORT_ROOTS
    """Directories of the snapshot put first on ``sys.path`` for in-process probes, in order."""
    setup: tuple[str, ...] | None = None
    """The command that builds a snapshot once per tree, before it is sealed (``tracker.targets.setup``)."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Variables the probe workers and the setup run with, besides regtrack's own."""
    timeout_s: float | None = None
    """Seconds per probe case unless ``--timeout`` says otherwise; None: the executor's default."""
    facts: Mapping[str, str] = field(default_factory=dict)
    """What the target declares about its environment; part of the environment fingerprint."""


@dataclass
class Config:
    """The targets, database URL and executor that a config file (or its absence) gives."""

    targets: dict[str, Target]
    db_url: str | None
    source: Path | None = None
    """The file the config was read from; None where the repository has none."""
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)

    def target(self, name: str | None) -> Target:
        if name is None:
            if len(self.targets) == 1:
                return next(iter(self.targets.values()))
            if DEFAULT_TARGET in self.targets:
                return self.targets[DEFAULT_TARGET]
            raise UsageError(f"{self.source} defines several targets ({self._known()}); pick one with --target NAME")
        if name not in self.targets:
            origin = f" in {self.source}" if self.source else ""
            raise UsageError(f"unknown target {name!r}{origin}; known targets: {self._known()}")
        return self.targets[name]

    def _known(self) -> str:
        return ", ".join(sorted(self.targets))


def normalise_paths(paths: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Repository-relative POSIX paths without ``./`` or trailing slashes, sorted, no duplicates.

    Raises ValueError for an empty list, an absolute path or one that climbs out with ``..``.
    """
    if not paths:
        raise ValueError("needs at least one path")
    clean = set()
    for raw in paths:
        path = PurePosixPath(raw)
        if not raw or path.is_absolute() or ".." in path.parts:
            raise ValueError(f"{raw!r} is not a path inside the repository")
        clean.add(str(path))
    return tuple(sorted(clean))


def git_toplevel(start: Path) -> Path | None:
    """The nearest directory at or above ``start`` holding ``.git`` (a directory or a worktree's file)."""
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory
    return None


def find_config(start: Path) -> tuple[Path, Mapping[str, Any]] | None:
    """The nearest config at or above ``start``, stopping at the git top-level: its file and its table.

    In each directory ``regtrack.toml`` comes before a ``pyproject.toml`` with ``[tool.regtrack]``.
    """
    start = start.resolve()
    top = git_toplevel(start)
    for directory in (start, *start.parents):
        own = directory / CONFIG_FILE
        if own.is_file():
            return own, _read_toml(own)
        pyproject = directory / PYPROJECT
        if pyproject.is_file():
            tool = _read_toml(pyproject).get("tool")
            section = tool.get("regtrack") if isinstance(tool, dict) else None
            if section is not None:
                if not isinstance(section, dict):
                    raise UsageError(f"{pyproject}: tool.regtrack must be a table; write it as [tool.regtrack]")
                return pyproject, section
        if directory == top:
            break
    return None


def load_config(start: Path, repo_override: Path | None = None) -> Config:
    """The config found from ``repo_override`` when given (never from ``start`` then), else from
    ``start``; a repository without one gets a target with no probes (see ``Target.probes``)."""
    found = find_config(repo_override if repo_override is not None else start)
    if found is None:
        return _default_config(start, repo_override)
    file, table = found
    prefix = "tool.regtrack." if file.name == PYPROJECT else ""
    return _parse(file, table, prefix, repo_override)


def _default_config(start: Path, repo_override: Path | None) -> Config:
    repo = repo_override if repo_override is not None else git_toplevel(start.resolve())
    if repo is None:
        raise UsageError(
            f"{start} is not inside a git repository and no {CONFIG_FILE} was found; "
            "run regtrack inside a repository or pass --repo PATH"
        )
    return Config({DEFAULT_TARGET: Target(DEFAULT_TARGET, repo.resolve())}, db_url=None)


def _read_toml(file: Path) -> dict[str, Any]:
    try:
        with file.open("rb") as handle:
            return tomllib.load(handle)
    except UnicodeDecodeError as error:
        raise UsageError(_not_utf8(file, error)) from None
    except tomllib.TOMLDecodeError as error:
        raise UsageError(f"{file} is not valid TOML: {error}; fix the syntax") from None
    except OSError as error:
        raise UsageError(f"cannot read {file}: {error.strerror}; check its permissions") from None


def _not_utf8(file: Path, error: UnicodeDecodeError) -> str:
    """TOML files are UTF-8 by definition; name the first byte that is not, and its line."""
    line = error.object[: error.start].count(b"\n") + 1
    return f"{file} is not UTF-8 text (byte 0x{error.object[error.start]:02x} on line {line}); save it as UTF-8"


def _parse(file: Path, table: Mapping[str, Any], prefix: str, repo_override: Path | None) -> Config:
    parsed = convert(file, prefix, table, ConfigFile)
    targets = {
        name: _target(file, f"{prefix}targets.{name}", name, entry, repo_override)
        for name, entry in parsed.targets.items()
    }
    return Config(targets, db_url=parsed.db_url, source=file, executor=parsed.executor)


def _target(file: Path, key: str, name: str, table: TargetTable, repo_override: Path | None) -> Target:
    target = Target(name, _target_repo(file, key, table.repo, repo_override), branch=table.branch)
    if table.paths is not None:
        try:
            target = replace(target, paths=normalise_paths(table.paths))
        except ValueError as error:
            raise UsageError(f"{file}: {key}.paths {error}; list directories relative to the repository") from None
    if table.probes is not None:
        names, specs = parse_probes(file, f"{key}.probes", table.probes, target.repo)
        target = replace(target, probes=names, probe_specs=specs)
    if table.import_roots is not None:
        roots = _import_roots(file, f"{key}.import_roots", table.import_roots, target.paths)
        target = replace(target, import_roots=roots)
    if table.setup is not None:
        when_empty = "name the program that builds a snapshot, or leave the key out"
        target = replace(target, setup=tuple(command_line(file, f"{key}.setup", table.setup, when_empty)))
    _check_environment(file, f"{key}.env", table.env)
    return replace(target, env=dict(table.env), timeout_s=table.timeout, facts=dict(table.facts))


def _target_repo(file: Path, key: str, repo: str | None, repo_override: Path | None) -> Path:
    if repo_override is not None:
        return repo_override.resolve()
    if repo is None:
        raise UsageError(f"{file}: {key}.repo is missing; set it to the repository's path (relative to the file)")
    return (file.parent / Path(repo).expanduser()).resolve()


def _import_roots(file: Path, key: str, roots: list[str], paths: tuple[str, ...]) -> tuple[str, ...]:
    """Relative directories, in the order given, each the snapshot's root or a path the snapshot holds."""
    if not roots:
        raise UsageError(
            f'{file}: {key} is empty; list directories such as "src", or leave the key out for the snapshot root'
        )
    clean = []
    for raw in roots:
        root = PurePosixPath(raw)
        if not raw or root.is_absolute() or ".." in root.parts:
            raise UsageError(
                f"{file}: {key} {raw!r} is not a path inside the repository; list directories relative to it"
            )
        if not _in_snapshot(root, paths):
            raise UsageError(
                f"{file}: {key} {raw!r} is outside the target's paths ({', '.join(paths)}); "
                "add it to paths or name a directory under them"
            )
        clean.append(str(root))
    return tuple(dict.fromkeys(clean))


def _in_snapshot(root: PurePosixPath, paths: tuple[str, ...]) -> bool:
    """Whether a snapshot of ``paths`` has the directory ``root``: its own root, a path, or a
    directory above or below one."""
    if root == PurePosixPath("."):
        return True
    return any(root.is_relative_to(path) or path.is_relative_to(root) for path in map(PurePosixPath, paths))


def _check_environment(file: Path, key: str, variables: Mapping[str, str]) -> None:
    for name, text in variables.items():
        if not name or "=" in name or "\0" in name + text:
            raise UsageError(
                f"{file}: {key}.{name} cannot be an environment variable (no '=' in names, no NUL anywhere); rename it"
            )
