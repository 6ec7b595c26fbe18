"""The demo backend's latency: a decode and a target-verify graph replay, timed; the check is
``probes.demo_backend.judges.latency``. A metric probe, not among the correctness probes the demo
target lists: ask for it by name (``--probe demo_latency``). On CUDA it times the kernel the
backend picks there (FlashInfer's XQA): the torch kernel, which holds the demo history's planted
slowdown, reads each request's length on the host and so cannot be captured in a CUDA graph."""

from __future__ import annotations

from probes.api import Case, Probe
from probes.registry import register
from tracker.core.metrics import Direction, Metric

PROBE = register(
    Probe(
        name="demo_latency",
        version=1,
        description="decode and target-verify graph replays of the demo backend, timed",
        cases=(
            Case("bs4-p16", dict(bs=4, page=16, kv=320, draft_tokens=4)),
            Case("bs16-p64", dict(bs=16, page=64, kv=640, draft_tokens=4)),
        ),
        check="probes.demo_backend.judges.latency:check",
        requires=("torch",),
        metrics=(
            Metric("decode_us", "us", Direction.LOWER_IS_BETTER),
            Metric("target_verify_us", "us", Direction.LOWER_IS_BETTER),
        ),
        repeat=15,
    )
)
