"""Probes for the verdict-integrity tests, imported by the parent and the workers through
REGTRACK_PROBE_MODULES. They read the revision's ``backend`` package of a small test repository:
``STEP`` (its position in the history) and ``BAD`` (whether the planted bug is in).

Test hooks, all through the environment: INTEGRITY_COUNTER (a file counting executions) with
INTEGRITY_KILL_AT=K kills the regtrack process (the worker's parent) with SIGKILL a second into
the K-th execution; INTEGRITY_SLOW_S makes every case sleep first.
"""

from __future__ import annotations

import os
import random
import signal
import stat
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from probes import Case, Probe, ProbeContext, ProbeResult, register
from tracker.core.verdicts import Outcome

FAIL_AFTER = 0.7
FAIL_BEFORE = 0.1


def _hooks() -> None:
    if slow := os.environ.get("INTEGRITY_SLOW_S"):
        time.sleep(float(slow))
    counter = os.environ.get("INTEGRITY_COUNTER")
    if not counter:
        return
    path = Path(counter)
    count = int(path.read_text() or 0) + 1 if path.exists() else 1
    path.write_text(str(count))
    if str(count) == os.environ.get("INTEGRITY_KILL_AT"):
        time.sleep(1)  # the results of the cases before this one reach the parent first
        os.kill(os.getppid(), signal.SIGKILL)
        time.sleep(60)


def flaky(ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
    """Fails 70% of runs once BAD, 10% before: a deterministic function of seed and revision."""
    _hooks()
    backend = ctx.import_package("backend")
    draw = random.Random(f"{ctx.seed}:{backend.STEP}").random()
    failed = draw < (FAIL_AFTER if backend.BAD else FAIL_BEFORE)
    return ProbeResult(Outcome.FAIL, {"draw": draw}, "planted failure") if failed else ProbeResult.passed(draw=draw)


def steady(ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
    """Fails exactly when BAD; reports the dtype it ran at and the case's parameter."""
    _hooks()
    metrics = {"float32": 0.0, "bfloat16": 1.0, "float16": 2.0, "float64": 3.0}[ctx.dtype]
    if ctx.import_package("backend").BAD:
        return ProbeResult(Outcome.FAIL, {"dtype_code": metrics}, "planted failure")
    return ProbeResult.passed(dtype_code=metrics, scale=float(params["scale"]))


def out_of_memory(ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
    if params["how"] == "memoryerror":
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, resource.RLIM_INFINITY))
        _ = bytearray(1 << 31)
    os.kill(os.getpid(), signal.SIGKILL)
    raise AssertionError("unreachable")


def fork_then_die(ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
    """Dies while a forked child, which inherited the protocol pipe, lives on."""
    if os.fork() == 0:
        time.sleep(600)
        os._exit(0)
    time.sleep(0.2)
    os._exit(3)


def stray_line(ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
    """Writes a line that is not JSON to every pipe this process may write to, then passes."""
    for fd in map(int, os.listdir("/proc/self/fd")):
        try:
            if fd > 2 and stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.write(fd, b"stray output from a probe\n")
        except OSError:
            continue
    return ProbeResult.passed()


def tamper(ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
    """Case "tamper" plants the bug in its own snapshot (as the revision's code might write to its
    tree); case "check" then judges what it reads."""
    if params["tamper"]:
        source = ctx.root / "backend" / "__init__.py"
        os.chmod(source, 0o644)
        source.write_text(source.read_text().replace("BAD = False", "BAD = True"))
        return ProbeResult.passed()
    return (
        ProbeResult(Outcome.FAIL, signature="planted failure")
        if ctx.import_package("backend").BAD
        else ProbeResult.passed()
    )


register(Probe("integrity_flaky", 1, "fails often once BAD, sometimes before", (Case("only", {}),), flaky))
register(
    Probe(
        "integrity_steady",
        1,
        "fails exactly when BAD",
        tuple(Case(f"c{i}", {"scale": i}) for i in range(4)),
        steady,
    )
)
register(
    Probe(
        "integrity_oom",
        1,
        "runs out of memory",
        (Case("memoryerror", {"how": "memoryerror"}), Case("sigkill", {"how": "sigkill"})),
        out_of_memory,
    )
)
register(Probe("integrity_fork_crash", 1, "dies with a child holding the pipe", (Case("only", {}),), fork_then_die))
register(
    Probe(
        "integrity_tamper",
        1,
        "edits its snapshot",
        (Case("tamper", {"tamper": True}), Case("check", {"tamper": False})),
        tamper,
    )
)
register(Probe("integrity_stray", 1, "writes stray protocol lines", (Case("only", {}),), stray_line))
