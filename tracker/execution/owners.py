"""Who holds a claim or drives a session: this process, named so another process can tell whether
it is still alive.

An owner is ``host:pid:start`` (``start`` is the process's start time in clock ticks since boot,
so a recycled pid is not mistaken for the owner). On the same host liveness is checked directly;
a claim from another host is stale only once it expires.
"""

from __future__ import annotations

import functools
import os
import socket
from datetime import UTC, datetime
from pathlib import Path


@functools.cache
def this_process() -> str:
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{_start_ticks(pid) or 0}"


def alive(owner: str) -> bool | None:
    """Whether the owning process still runs; None when it ran on another host."""
    host, pid_text, start_text = _split(owner)
    if host != socket.gethostname():
        return None
    pid = int(pid_text)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    start = _start_ticks(pid)
    return start is None or str(start) == start_text or start_text == "0"


def is_stale(owner: str, expires_at: datetime) -> bool:
    """A claim whose owner is known to be gone, or one past its expiry (its case would have timed out)."""
    return alive(owner) is False or datetime.now(UTC) > expires_at


def _split(owner: str) -> tuple[str, str, str]:
    host, pid, start = owner.rsplit(":", 2)
    return host, pid, start


def _start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat; None where there is no /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rpartition(")")[2].split()[19])
