"""What the parent and a probe worker exchange: jobs, results, and the protocol's constants.
The protocol itself is described in ``tracker.execution.worker``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from probes import registry
from probes.api import DEFAULT_IMPORT_ROOTS
from tracker.core.errors import UsageError
from tracker.core.verdicts import Outcome
from tracker.targets.inputs import Reads

PROBE_MODULES_ENV = registry.PROBE_MODULES_ENV
NONCE_ENV = "REGTRACK_WORKER_NONCE"
STOP_GRACE_S = 5.0
SELF_TIMED_GRACE_S = 5.0
"""How much longer than its own timeout the parent waits for a job that keeps its own time."""
LOG_TAIL_LINES = 30
STACK_DUMP_WAIT_S = 0.2
SNAPSHOT_MODIFIED = "snapshot modified before the case"
"""A case that found its snapshot edited did not run: the parent rebuilds the snapshot and runs it again."""


@dataclass(frozen=True)
class Revision:
    """What to materialise where a job runs, for an executor that makes its own snapshots
    (``makes_snapshots``): the repository, reached by this path there, the commit and the paths."""

    repo: str
    sha: str
    paths: tuple[str, ...]


@dataclass(frozen=True)
class Job:
    probe: str
    case_id: str
    root: str
    device: str
    dtype: str
    seed: int
    import_roots: tuple[str, ...] = DEFAULT_IMPORT_ROOTS
    """Directories of ``root`` (relative to it) that the revision's packages are imported from."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Variables the worker runs with besides its own: a worker started with others is restarted."""
    source: Mapping[str, Any] = field(default_factory=dict)
    """The probe's ``ProbeSpec.to_json()``; empty: the registered probe called ``probe``."""
    code_hash: str = ""
    """The code hash the parent stores results under; a worker whose probe hashes otherwise refuses the job."""
    timeout_s: float | None = None
    """Set for a probe that keeps its own time (a command): the parent's guard waits a grace longer."""
    revision: Revision | None = None
    """Set instead of ``root`` when the executor makes the snapshot where the job runs."""


@dataclass(frozen=True)
class JobResult:
    outcome: Outcome
    metrics: dict[str, float]
    signature: str | None
    detail: str
    duration_s: float
    reads: Reads | None = None
    """What an in-process case read of its snapshot; None for a command, a crash or a timeout."""
    samples: dict[str, list[float]] = field(default_factory=dict)
    """A metric probe's samples by metric."""
    conditions: dict[str, str] = field(default_factory=dict)
    """What moved a metric probe's timings as it ran (``tracker.execution.conditions``)."""


def import_probe_modules() -> None:
    """Import the modules named in $REGTRACK_PROBE_MODULES (comma-separated) so their probes register."""
    try:
        registry.import_probe_modules()
    except registry.ProbeLoadError as exc:
        raise UsageError(str(exc)) from exc
