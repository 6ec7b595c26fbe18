"""Samples of a call's time, for metric probes.

On the CPU each sample is ``time.perf_counter_ns`` around one call, with the process pinned to one
core while it is timed where the OS allows it (a migration between cores is noise of its own), and
torch, where it is loaded, on one intra-op thread: its pool's threads sharing that one core would
spin against each other, and made the demo's decode replays of one tree differ by 60 % between
processes. On
the GPU each sample is a pair of CUDA events around one call (a replayed CUDA graph, warmed up
first), at the clocks the GPU runs at: they are recorded with the environment, not set here.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

WARMUP = 3
"""Calls made and not timed before the samples: first calls pay for caches, allocations, JIT."""


@contextmanager
def pinned() -> Iterator[int | None]:
    """This process on one core of those it may run on (the last), and a loaded torch on one
    thread, restored after; yields the core, or None where affinity cannot be set (not Linux, or
    refused)."""
    if not hasattr(os, "sched_getaffinity"):
        yield None
        return
    allowed = os.sched_getaffinity(0)
    core = max(allowed)
    try:
        os.sched_setaffinity(0, {core})
    except OSError:
        yield None
        return
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else None
    try:
        if torch is not None:
            torch.set_num_threads(1)
        yield core
    finally:
        if torch is not None and threads is not None:
            torch.set_num_threads(threads)
        os.sched_setaffinity(0, allowed)


def cpu_samples_us(call: Callable[[], object], repeat: int, warmup: int = WARMUP) -> list[float]:
    """``repeat`` wall times of ``call()`` in microseconds, pinned, after ``warmup`` untimed calls."""
    samples = []
    with pinned():
        for _ in range(warmup):
            call()
        for _ in range(repeat):
            started = time.perf_counter_ns()
            call()
            samples.append((time.perf_counter_ns() - started) / 1e3)
    return samples


def cuda_samples_us(call: Callable[[], object], repeat: int, warmup: int = WARMUP) -> list[float]:
    """``repeat`` GPU times of ``call()`` in microseconds, each between two CUDA events on the
    current stream, after ``warmup`` untimed calls."""
    import torch

    for _ in range(warmup):
        call()
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeat)]
    for start, end in pairs:
        start.record()
        call()
        end.record()
    torch.cuda.synchronize()
    return [start.elapsed_time(end) * 1e3 for start, end in pairs]
