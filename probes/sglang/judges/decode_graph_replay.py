"""SGLang TRTLLM MHA decode CUDA-graph replays vs the closed form and the eager path.

A decode graph is captured once and replayed for new requests whose lengths open new pages,
with full and padded batches. What the graph's attention call reads after each replay, and the
eager path's metadata for the same batch, must be the closed form: q length 1, ``cache_seqlens``
= ``seq_lens``, the pages of those lengths. The ``host-lag`` case serves batches whose host copy
of ``seq_lens`` trails the device one (overlap scheduling); it applies only to a backend that
declares it does not read that copy (``needs_cpu_seq_lens = False``), since for the others the
runner keeps the copy in step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from probes.api import ProbeContext, ProbeResult
from probes.sglang.checks import Expected, differences, join
from probes.sglang.fixture import page_start_lengths
from probes.sglang.session import Subject, guarded, serve
from tracker.core.verdicts import Outcome

GRAPH_BS = 4
BATCH_SIZES = (4, 3, 4, 1)


def check(ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
    return guarded(ctx, lambda subject: judge(subject, params))


def judge(subject: Subject, params: Mapping[str, Any]) -> ProbeResult:
    lag = params["host_lag"]
    backend_class = subject.backend_module.TRTLLMHAAttnBackend
    if lag and getattr(backend_class, "needs_cpu_seq_lens", True):
        return ProbeResult(
            Outcome.SKIP, detail="the backend reads the host seq_lens (needs_cpu_seq_lens): the runner keeps it in step"
        )
    problems: list[str] = []
    replays = failed = 0
    for page in params["pages"]:
        serving = serve(subject, mode="decode", page_size=page, bs=GRAPH_BS, draft_tokens=0)
        serving.capture()
        generator = torch.Generator().manual_seed(subject.seed + page)
        for size in BATCH_SIZES:
            batch = serving.admit(page_start_lengths(page, size, generator), host_lag=lag)
            expected = Expected(1, batch.kv_lens, serving.pool.page_rows(batch.req_pool_indices, batch.kv_lens))
            found = differences("graph", serving.replay(batch), expected)
            found += differences("eager", serving.eager(batch), expected)
            problems += found
            replays, failed = replays + 1, failed + bool(found)
    metrics = {"replays": float(replays), "failed_replays": float(failed)}
    if not problems:
        return ProbeResult(Outcome.PASS, metrics)
    return ProbeResult(Outcome.FAIL, metrics, signature=join(problems))
