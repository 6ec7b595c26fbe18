"""Metric probes' timing: CPU samples are wall times of each call, taken pinned to one core and
given back unpinned; GPU samples come from CUDA events (on the GPU machine)."""

from __future__ import annotations

import os
import time

import pytest
import torch

from probes.timing import cpu_samples_us, cuda_samples_us, pinned


def test_each_cpu_sample_is_one_calls_wall_time_after_the_warmup() -> None:
    calls = []

    def sleepy() -> None:
        calls.append(1)
        time.sleep(0.002)

    samples = cpu_samples_us(sleepy, repeat=5, warmup=2)
    assert len(samples) == 5 and len(calls) == 7
    assert all(2000 <= value < 200_000 for value in samples)


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no CPU affinity on this OS")
def test_timing_runs_on_one_core_and_gives_the_others_back() -> None:
    before = os.sched_getaffinity(0)
    seen = []
    with pinned() as core:
        seen.append(os.sched_getaffinity(0))
    assert core in before and seen == [{core}]
    assert os.sched_getaffinity(0) == before


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_samples_time_the_gpu_work_of_each_call() -> None:
    a = torch.randn(2048, 2048, device="cuda")
    small = cuda_samples_us(lambda: a @ a, repeat=5)
    large = cuda_samples_us(lambda: [a @ a for _ in range(8)], repeat=5)
    assert len(small) == 5 and all(value > 0 for value in small)
    assert min(large) > 4 * max(small)
