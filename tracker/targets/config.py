"""Targets from ``regtrack.toml`` or ``[tool.regtrack]`` in ``pyproject.toml``, found like git finds its repository."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

from probes.api import DEFAULT_IMPORT_ROOTS
from probes.sources import ProbeSpec
from tracker.core.errors import UsageError
from tracker.targets.probe_tables import command_line, parse_probes
from tracker.targets.revisions import ROOT_PATH

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

CONFIG_FILE = "regtrack.toml"
PYPROJECT = "pyproject.toml"
DEFAULT_TARGET = "default"
DEFAULT_BRANCH = "main"
TOP_KEYS = ("db_url", "targets", "executor")
EXECUTOR_KEYS = ("kind", "ray_address", "gpus_per_actor")
EXECUTOR_KINDS = ("local", "ray")
TARGET_KEYS = ("repo", "paths", "probes", "branch", "import_roots", "setup", "env", "timeout", "facts")


@dataclass
class Target:
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


@dataclass(frozen=True)
class ExecutorConfig:
    """The ``[executor]`` table: where probe jobs run unless ``--executor`` says otherwise."""

    kind: str = "local"
    ray_address: str | None = None
    gpus_per_actor: float | None = None
    """What each Ray actor asks for: one GPU, or a fraction to share one; None: 1 on cuda, 0 on cpu."""


@dataclass
class Config:
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
    _check_keys(file, table, prefix, TOP_KEYS)
    db_url = table.get("db_url")
    if db_url is not None and not isinstance(db_url, str):
        raise UsageError(f'{file}: {prefix}db_url must be a string such as "sqlite:///path/regtrack.db"')
    targets = table.get("targets")
    if not isinstance(targets, dict) or not targets:
        raise UsageError(f"{file}: {prefix}targets is missing; add a [{prefix}targets.NAME] table with repo = PATH")
    parsed = {}
    for name, entry in targets.items():
        key = f"{prefix}targets.{name}"
        if not isinstance(entry, dict):
            raise UsageError(f"{file}: {key} must be a table; write it as [{key}]")
        parsed[name] = _parse_target(file, key, name, entry, repo_override)
    return Config(parsed, db_url=db_url, source=file, executor=_parse_executor(file, table.get("executor", {}), prefix))


def _parse_executor(file: Path, entry: object, prefix: str) -> ExecutorConfig:
    key = f"{prefix}executor"
    if not isinstance(entry, dict):
        raise UsageError(f"{file}: {key} must be a table; write it as [{key}]")
    _check_keys(file, entry, f"{key}.", EXECUTOR_KEYS)
    kind = entry.get("kind", "local")
    if kind not in EXECUTOR_KINDS:
        raise UsageError(f"{file}: {key}.kind must be one of {', '.join(EXECUTOR_KINDS)}, not {kind!r}")
    address = entry.get("ray_address")
    if address is not None and not isinstance(address, str):
        raise UsageError(f'{file}: {key}.ray_address must be a string such as "auto" or "ray://head:10001"')
    gpus = entry.get("gpus_per_actor")
    if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, (int, float)) or not 0 <= gpus <= 1):
        raise UsageError(f"{file}: {key}.gpus_per_actor must be a number from 0 to 1 (a GPU or a share of one)")
    return ExecutorConfig(kind, address, float(gpus) if gpus is not None else None)


def _parse_target(file: Path, key: str, name: str, entry: Mapping[str, Any], repo_override: Path | None) -> Target:
    _check_keys(file, entry, f"{key}.", TARGET_KEYS)
    target = Target(name, _target_repo(file, key, entry, repo_override))
    if "paths" in entry:
        try:
            paths = normalise_paths(_strings(file, f"{key}.paths", entry["paths"]))
        except ValueError as error:
            raise UsageError(f"{file}: {key}.paths {error}; list directories relative to the repository") from None
        target = replace(target, paths=paths)
    if "probes" in entry:
        names, specs = parse_probes(file, f"{key}.probes", entry["probes"], target.repo)
        target = replace(target, probes=names, probe_specs=specs)
    if "branch" in entry:
        branch = entry["branch"]
        if not isinstance(branch, str) or not branch:
            raise UsageError(f'{file}: {key}.branch must be a branch name such as "main"')
        target = replace(target, branch=branch)
    return _parse_preparation(file, key, entry, target)


def _parse_preparation(file: Path, key: str, entry: Mapping[str, Any], target: Target) -> Target:
    """The keys that say how a revision becomes testable: import roots, setup, env, timeout, facts."""
    if "import_roots" in entry:
        target = replace(target, import_roots=_import_roots(file, f"{key}.import_roots", entry["import_roots"], target.paths))
    if "setup" in entry:
        target = replace(target, setup=_setup(file, f"{key}.setup", entry["setup"]))
    if "env" in entry:
        target = replace(target, env=_environment(file, f"{key}.env", entry["env"]))
    if "timeout" in entry:
        timeout = entry["timeout"]
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
            raise UsageError(f"{file}: {key}.timeout must be a number of seconds above 0, such as 600")
        target = replace(target, timeout_s=float(timeout))
    if "facts" in entry:
        target = replace(target, facts=_string_table(file, f"{key}.facts", entry["facts"], 'cluster = "h200-pool"'))
    return target


def _import_roots(file: Path, key: str, value: object, paths: tuple[str, ...]) -> tuple[str, ...]:
    """Relative directories, in the order given, each the snapshot's root or a path the snapshot holds."""
    roots = _strings(file, key, value)
    if not roots:
        raise UsageError(f'{file}: {key} is empty; list directories such as "src", or leave the key out for the snapshot root')
    clean = []
    for raw in roots:
        root = PurePosixPath(raw)
        if not raw or root.is_absolute() or ".." in root.parts:
            raise UsageError(f"{file}: {key} {raw!r} is not a path inside the repository; list directories relative to it")
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
    return any(root.is_relative_to(path) or PurePosixPath(path).is_relative_to(root) for path in map(PurePosixPath, paths))


def _setup(file: Path, key: str, value: object) -> tuple[str, ...]:
    return tuple(command_line(file, key, value, '["make", "build"]', "name the program that builds a snapshot, or leave the key out"))


def _environment(file: Path, key: str, value: object) -> dict[str, str]:
    variables = _string_table(file, key, value, 'CUDA_HOME = "/usr/local/cuda"')
    for name, text in variables.items():
        if not name or "=" in name or "\0" in name + text:
            raise UsageError(f"{file}: {key}.{name} cannot be an environment variable (no '=' in names, no NUL anywhere); rename it")
    return variables


def _string_table(file: Path, key: str, value: object, example: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise UsageError(f"{file}: {key} must be a table of strings; write it as [{key}] with lines such as {example}")
    for name, item in value.items():
        if not isinstance(item, str):
            raise UsageError(f'{file}: {key}.{name} must be a string; quote it, as in {name} = "{item}"')
    return dict(value)


def _target_repo(file: Path, key: str, entry: Mapping[str, Any], repo_override: Path | None) -> Path:
    if repo_override is not None:
        return repo_override.resolve()
    if "repo" not in entry:
        raise UsageError(f"{file}: {key}.repo is missing; set it to the repository's path (relative to the file)")
    repo = entry["repo"]
    if not isinstance(repo, str) or not repo:
        raise UsageError(f'{file}: {key}.repo must be a path string such as "."')
    return (file.parent / Path(repo).expanduser()).resolve()


def _strings(file: Path, key: str, value: object) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise UsageError(f"{file}: {key} must be a list of strings")
    return list(value)


def _check_keys(file: Path, table: Mapping[str, Any], prefix: str, known: tuple[str, ...]) -> None:
    for key in table:
        if key not in known:
            raise UsageError(f"{file}: unknown key {prefix}{key}; known keys here: {', '.join(known)}")
