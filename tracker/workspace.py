"""What a command works on: the config's target, its repository, the store and the snapshot cache.

The executors are imported where ``ExecutionOptions`` builds one, so that a query, which only
reads the store, loads none of them."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from probes.api import Probe
from probes.registry import MissingRequirement, ProbeLoadError, known_names
from probes.sources import ProbeSpec, Source, adhoc_command_name, command_spec, resolve, split_command
from tracker.core.errors import UsageError
from tracker.execution.protocol import import_probe_modules
from tracker.targets.command_inputs import worktree_inputs
from tracker.targets.config import Config, ExecutorConfig, Target, load_config
from tracker.targets.revisions import ROOT_PATH, Repo
from tracker.targets.snapshots import SnapshotCache

if TYPE_CHECKING:
    from db.store import Store
    from tracker.execution.executors import Executor


@dataclass(frozen=True)
class ExecutionOptions:
    device: str = "cpu"
    dtype: str | None = None
    workers: int = 1
    timeout_s: float | None = None
    """None: each target's own timeout, else the executor's default."""
    seed: int | None = None
    executor_kind: str | None = None
    """``local`` or ``ray``; None: the config's ``[executor]``, else local."""
    ray_address: str | None = None

    @property
    def resolved_dtype(self) -> str:
        return self.dtype or ("bfloat16" if self.device.startswith("cuda") else "float32")

    def executor_of(self, config: ExecutorConfig) -> str:
        """The kind of executor these options and the config's ``[executor]`` table (options first) name."""
        return self.executor_kind or config.kind

    def executor(self, config: ExecutorConfig | None = None, *, gpu_told_by_nvidia_smi: bool = False) -> Executor:
        """The executor these options and ``config`` name. ``gpu_told_by_nvidia_smi``: a local GPU's
        stack is told by nvidia-smi, not by a worker, for a command that may find every result
        stored; where a worker then words it otherwise, ``EnvironmentRefuted`` (see
        ``LocalExecutor.environment``)."""
        from tracker.execution.executors import LocalExecutor

        configured = config or ExecutorConfig()
        if self.executor_of(configured) == "ray":
            from tracker.execution.ray_executor import RayExecutor

            address = self.ray_address or configured.ray_address
            return RayExecutor(
                self.device, self.resolved_dtype, self.workers, self.timeout_s, address, configured.gpus_per_actor
            )
        return LocalExecutor(
            self.device,
            self.resolved_dtype,
            workers=self.workers,
            timeout_s=self.timeout_s,
            gpu_told_by_nvidia_smi=gpu_told_by_nvidia_smi,
        )


@dataclass
class Workspace:
    """``store`` is open read-only for a command that may find everything it needs stored
    (``open_read_only``)."""

    config: Config
    target: Target
    repo: Repo
    store: Store
    snapshots: SnapshotCache
    cwd: Path
    """The directory the command was given from: where ``--command`` finds the files it names."""

    @classmethod
    def open(cls, repo: Path | None = None, target: str | None = None, cwd: Path | None = None) -> Workspace:
        return _opened(repo, target, cwd, read_only=False)

    @classmethod
    def open_read_only(cls, repo: Path | None = None, target: str | None = None, cwd: Path | None = None) -> Workspace:
        """Over the store opened read-only; ``db.errors.NotStored`` where it cannot be (no database
        yet, one behind the newest schema revision) and wherever a write is asked of it."""
        return _opened(repo, target, cwd, read_only=True)

    def close(self) -> None:
        """Close the store; at most once an hour, bound the snapshot cache with the default limits."""
        self.store.close()
        self.snapshots.auto_gc()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def probe(self, name: str | None) -> Probe:
        """``name``, or the target's first probe, built from its source as every worker builds it."""
        import_probe_modules()
        chosen = name or self._probe_names()[0]
        try:
            return resolve(self._with_worktree_inputs(self.target.probe_specs.get(chosen) or ProbeSpec(chosen)))
        except KeyError:
            known = ", ".join(dict.fromkeys([*self.target.probe_specs, *known_names()]))
            raise UsageError(f"unknown probe {chosen!r}; known probes: {known}") from None
        except MissingRequirement as error:
            raise UsageError(str(error)) from None
        except ProbeLoadError as error:
            raise UsageError(f"probe {chosen!r}: {error}") from None

    def command_probe(self, command: str) -> tuple[Workspace, Probe]:
        """The probe of ``--command`` and the workspace it measures in: the command line run in a
        snapshot of the whole repository, named after it, so the same command line finds its stored
        results. The workspace returned is a copy whose target's paths are ``.``; this one is unchanged."""
        try:
            argv = split_command(command)
        except ValueError as error:
            raise UsageError(f"--command cannot be split like a shell would ({error}); balance its quotes") from None
        if not argv:
            raise UsageError("--command is empty; give the command to run, as for git bisect run")
        whole = replace(self, target=replace(self.target, paths=(ROOT_PATH,)))
        inputs = worktree_inputs(argv, self.cwd, self.repo)
        return whole, resolve(command_spec(adhoc_command_name(argv), argv, self.cwd, inputs))

    def _with_worktree_inputs(self, spec: ProbeSpec) -> ProbeSpec:
        """A configured command with the untracked files it names (besides its ``inputs``) taken
        from the work tree (``tracker.targets.command_inputs``)."""
        if spec.source is not Source.COMMAND:
            return spec
        found = worktree_inputs(spec.command, Path(spec.base), self.repo)
        return replace(spec, inputs=tuple(dict.fromkeys([*spec.inputs, *found])))

    def probes(self, names: tuple[str, ...]) -> list[Probe]:
        return [self.probe(name) for name in (names or self._probe_names())]

    def _probe_names(self) -> tuple[str, ...]:
        """The target's probes; a usage error where it has none, since nothing would be tested."""
        if self.target.probes:
            return self.target.probes
        if self.config.source is None:
            raise UsageError(
                f"{self.repo.path} has no regtrack.toml, so there is nothing to probe; pass --command CMD "
                "(run at each revision, as for git bisect run), or write a config with `regtrack init`"
            )
        raise UsageError(
            f"target {self.target.name!r} in {self.config.source} lists no probes; add probes = [...] "
            f"or a [targets.{self.target.name}.probes.P] table to it, or pass --command CMD"
        )


def _opened(repo: Path | None, target: str | None, cwd: Path | None, read_only: bool) -> Workspace:
    from db.store import Store

    start = cwd or Path.cwd()
    config = load_config(start, repo)
    chosen = config.target(target)
    store = Store.open(database_url(config), read_only=read_only)
    return Workspace(config, chosen, Repo(chosen.repo), store, SnapshotCache(), start)


def database_url(config: Config) -> str | None:
    """``REGTRACK_DB_URL`` wins over the config's ``db_url``; neither means the default file."""
    return os.environ.get("REGTRACK_DB_URL") or config.db_url
