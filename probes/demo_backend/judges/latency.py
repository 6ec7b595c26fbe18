"""Time the demo backend's graph replays: decode, and target verify of N draft tokens.

Each metric is ``ctx.repeat`` samples of one replay of a fixed batch (the metadata apply and the
attention call), after a warm-up: CUDA events around a replayed CUDA graph on the GPU, the wall
time pinned to one core on the CPU (``probes.timing``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probes.api import ProbeContext, ProbeResult
from probes.demo_backend.scenario import make_scenario
from probes.timing import cpu_samples_us, cuda_samples_us
from tracker.core.verdicts import Outcome


def check(ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
    bk = ctx.import_package("backend")
    modes = {"decode_us": bk.ForwardMode.DECODE, "target_verify_us": bk.ForwardMode.TARGET_VERIFY}
    samples = {metric: _timed(bk, ctx, params, mode) for metric, mode in modes.items()}
    return ProbeResult(Outcome.PASS, samples=samples)


def _timed(bk: Any, ctx: ProbeContext, params: Mapping[str, Any], mode: Any) -> list[float]:
    """Samples of one replay of ``params["bs"]`` requests of up to ``params["kv"]`` tokens."""
    bs, N = params["bs"], params["draft_tokens"]
    T = 1 if mode is bk.ForwardMode.DECODE else N
    scn = make_scenario(bk, ctx, page_size=params["page"], draft_tokens=N)
    runner = bk.GraphRunner(scn.backend, mode, [bs], T)
    runner.capture()
    seq_lens = scn.random_lengths(bs, params["kv"] // 2, params["kv"] - T)
    req = scn.admit(seq_lens if T == 1 else [s + T for s in seq_lens])
    lens, q = scn.forward_batch(mode, req, seq_lens, T).seq_lens, scn.random_q(bs * T)
    timed = cuda_samples_us if ctx.is_cuda else cpu_samples_us
    return timed(lambda: runner.replay(req, lens, q), ctx.repeat)
