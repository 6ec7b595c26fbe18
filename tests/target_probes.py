"""Probes of a small package that is not called ``backend`` (``mylib``, under ``src/`` of a test
repository), imported by the parent and the workers through REGTRACK_PROBE_MODULES. None of them
imports torch, and each reports whether torch is loaded in the worker that ran it.

``mylib`` holds ``VALUE`` and ``BROKEN``; a target's setup may write ``mylib/_built.py``
(``BUILT = 1``). ``TARGET_FLAG`` in the worker's environment is reported as ``flag``.
"""

from __future__ import annotations

import os
import stat
import sys
import time
from collections.abc import Mapping
from typing import Any

from probes import Case, Probe, ProbeContext, ProbeResult, register
from tracker.core.metrics import Direction, Metric
from tracker.core.verdicts import Outcome


def _observations(ctx: ProbeContext) -> dict[str, float]:
    built = ctx.root / "src" / "mylib" / "_built.py"
    return {
        "torch_loaded": float("torch" in sys.modules),
        "flag": float(os.environ.get("TARGET_FLAG") == "on"),
        "built": float(built.is_file()),
        "sealed": float(built.is_file() and not stat.S_IMODE(built.stat().st_mode) & 0o222),
    }


def value(ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
    """Fails when the revision's mylib is BROKEN; reports its VALUE scaled by the case."""
    mylib = ctx.import_package("mylib")
    metrics = {**_observations(ctx), "value": float(mylib.VALUE * params["scale"])}
    if mylib.BROKEN:
        return ProbeResult(Outcome.FAIL, metrics, "mylib is broken")
    return ProbeResult(Outcome.PASS, metrics)


def built(ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
    """Passes when the setup's output is importable from the revision."""
    metrics = _observations(ctx)
    return ProbeResult(Outcome.PASS if ctx.import_package("mylib._built").BUILT else Outcome.FAIL, metrics)


def slow(ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
    time.sleep(params["sleep_s"])
    return ProbeResult.passed(**_observations(ctx))


def latency(ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
    """A metric probe's stand-in: ``ctx.repeat`` samples around the revision's VALUE (in us), one
    short when the case says so; fails when mylib is BROKEN."""
    mylib = ctx.import_package("mylib")
    taken = [float(mylib.VALUE) * (1 + 0.01 * i) for i in range(ctx.repeat - params["short"])]
    return ProbeResult(Outcome.FAIL if mylib.BROKEN else Outcome.PASS, samples={"spin_us": taken})


LATENCY = (Metric("spin_us", "us", Direction.LOWER_IS_BETTER),)

register(Probe("mylib_value", 1, "mylib is not broken", (Case("x1", {"scale": 1}), Case("x10", {"scale": 10})), value))
register(Probe("mylib_built", 1, "the setup built mylib", (Case("only", {}),), built))
register(Probe("mylib_slow", 1, "takes its time", (Case("two_seconds", {"sleep_s": 2.0}),), slow))
register(Probe("mylib_latency", 1, "mylib's spin", (Case("spin", {"short": 0}),), latency, metrics=LATENCY, repeat=7))
register(Probe("mylib_short", 1, "one sample short", (Case("spin", {"short": 1}),), latency, metrics=LATENCY, repeat=7))
