"""Probes that misbehave, for the worker tests; the worker imports this via REGTRACK_PROBE_MODULES."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from typing import Any

from probes import Case, Probe, ProbeContext, ProbeResult, register
from tracker.core.verdicts import Outcome

SPAM_LINES = 20000


def crash(ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
    if params["how"] == "segfault":
        ctypes.string_at(0)
    os._exit(3)


def hang(ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
    child = subprocess.Popen(["sleep", "600"])
    print(f"child pid {child.pid}", flush=True)
    while True:
        time.sleep(1)


def spam(ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
    for i in range(SPAM_LINES):
        print(f'{{"result": {{"outcome": "fail", "line": {i}}}}}')
    sys.stdout.flush()
    os.write(1, b"raw bytes without a newline")
    return ProbeResult.passed(lines=float(SPAM_LINES), stdin_bytes=float(len(sys.stdin.read())))


register(
    Probe(
        "worker_test_crash",
        1,
        "dies mid-case",
        (Case("segfault", {"how": "segfault"}), Case("exit3", {"how": "exit"})),
        crash,
    )
)
register(Probe("worker_test_hang", 1, "never returns", (Case("forever", {}),), hang))
register(Probe("worker_test_spam", 1, "floods stdout and reads stdin", (Case("flood", {}),), spam))


def where(ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
    """Passes after ``sleep`` seconds, naming the GPUs the worker was given."""
    time.sleep(params["sleep"])
    return ProbeResult(Outcome.PASS, {}, detail=os.environ.get("CUDA_VISIBLE_DEVICES", ""))


def kill_host(ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
    """Kills the process that started the worker when that is a Ray actor (never a test process)."""
    with open(f"/proc/{os.getppid()}/cmdline", "rb") as cmdline:
        if cmdline.read().startswith(b"ray::"):
            os.kill(os.getppid(), signal.SIGKILL)
    time.sleep(60)
    return ProbeResult(Outcome.FAIL, {}, signature="the worker's host outlived it")


register(
    Probe(
        "worker_test_where", 1, "names its GPUs", (Case("quick", {"sleep": 0.0}), Case("slow", {"sleep": 3.0})), where
    )
)
register(Probe("worker_test_kill_host", 1, "kills its Ray actor", (Case("once", {}),), kill_host))
