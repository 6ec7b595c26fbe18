"""Probes that end the worker, or try to, for the worker tests; imported via REGTRACK_PROBE_MODULES."""

from __future__ import annotations

import os
import signal
import stat
import sys
import time
from collections.abc import Mapping
from typing import Any

from probes import Case, Probe, ProbeContext, ProbeResult, register


def leave(ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
    """Leaves the way a check written as a script might: ``sys.exit``, ``SystemExit``, Ctrl-C."""
    how = params["how"]
    if how == "sys.exit()":
        sys.exit()
    if how == "sys.exit(1)":
        sys.exit(1)
    if how == "sys.exit(3)":
        sys.exit(3)
    if how == "SystemExit":
        raise SystemExit(3)
    if how == "SIGINT":
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
    raise KeyboardInterrupt


def close_pipes_then_exit(ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
    """Closes every pipe the worker holds (its protocol's among them), then exits on its own a
    second later ("exit": the parent sees the pipe close well before the worker's exit) or never."""
    for fd in map(int, os.listdir("/proc/self/fd")):
        try:
            if fd > 2 and stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.close(fd)
        except OSError:
            continue
    time.sleep(1 if params["then"] == "exit" else 600)
    os._exit(3)


def sigkill_self(ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
    os.kill(os.getpid(), signal.SIGKILL)
    raise AssertionError("unreachable")


def allocate_forever(ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
    """Touches memory until the kernel stops it."""
    hoard = []
    while True:
        hoard.append(bytearray(1 << 20))


WAYS_OUT = ("sys.exit()", "sys.exit(1)", "sys.exit(3)", "SystemExit", "KeyboardInterrupt", "SIGINT")
register(Probe("exit_test_leave", 1, "ends its own case", tuple(Case(how, {"how": how}) for how in WAYS_OUT), leave))
register(
    Probe(
        "exit_test_close_pipes",
        1,
        "closes its pipes, then exits or hangs",
        (Case("exit", {"then": "exit"}), Case("hang", {"then": "hang"})),
        close_pipes_then_exit,
    )
)
register(Probe("exit_test_sigkill", 1, "is killed by a SIGKILL from outside", (Case("only", {}),), sigkill_self))
register(Probe("exit_test_greedy", 1, "allocates until killed", (Case("only", {}),), allocate_forever))
