"""What the parent and a probe worker exchange: jobs, results, and the protocol's constants.
The protocol itself is described in ``tracker.execution.worker``."""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from probes import Outcome
from tracker.core.errors import UsageError

if TYPE_CHECKING:
    pass


PROBE_MODULES_ENV = "REGTRACK_PROBE_MODULES"
NONCE_ENV = "REGTRACK_WORKER_NONCE"
STOP_GRACE_S = 5.0
LOG_TAIL_LINES = 30
STACK_DUMP_WAIT_S = 0.2
SNAPSHOT_MODIFIED = "snapshot modified before the case"
"""A case that found its snapshot edited did not run: the parent rebuilds the snapshot and runs it again."""
OOM_KILL_SIGNATURE = "out of memory: worker killed by SIGKILL (the OOM killer, or a kill from outside)"



@dataclass(frozen=True)
class Job:
    probe: str
    case_id: str
    root: str
    device: str
    dtype: str
    seed: int


@dataclass(frozen=True)
class JobResult:
    outcome: Outcome
    metrics: dict[str, float]
    signature: str | None
    detail: str
    duration_s: float



def import_probe_modules() -> None:
    """Import the modules named in $REGTRACK_PROBE_MODULES (comma-separated) so their probes register."""
    for name in filter(None, (n.strip() for n in os.environ.get(PROBE_MODULES_ENV, "").split(","))):
        try:
            importlib.import_module(name)
        except Exception as exc:
            raise UsageError(
                f"cannot import probe module {name!r} named in {PROBE_MODULES_ENV}: "
                f"{type(exc).__name__}: {exc}; fix the name or put its directory on PYTHONPATH"
            ) from exc


