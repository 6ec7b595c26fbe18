"""SGLang TRTLLM MHA sliding-window page table (hybrid SWA models) after graph replays and eagerly.

SWA layers read their KV from a second pool: the backend keeps a page table translated through
the pool's full->SWA slot mapping. For request b with KV length L, the pages holding tokens
``max(0, L - window) .. L - 1`` are the ones a sliding-window layer reads; each must hold
``mapping[req_to_token[req, p * page]] // page``. Where the revision keeps the translated write
locations (``swa_out_cache_loc``), those must be the mapping of the step's ``out_cache_loc``.
Checked for decode and for target verify (T == N, so the T != N bug is not in the way).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from probes.api import ProbeContext, ProbeResult
from probes.demo_backend.checks import field_difference
from probes.sglang.checks import join, window_differences
from probes.sglang.eras import has_sliding_window_page_table
from probes.sglang.fixture import Batch, crossing_prefixes
from probes.sglang.graph import MetadataView
from probes.sglang.session import Serving, Subject, guarded, serve
from tracker.core.verdicts import Outcome

GRAPH_BS = 4
BATCH_SIZES = (4, 2, 4)


def check(ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
    return guarded(ctx, lambda subject: judge(subject, params))


def judge(subject: Subject, params: Mapping[str, Any]) -> ProbeResult:
    if not has_sliding_window_page_table(subject.backend_module):
        return ProbeResult(Outcome.SKIP, signature="no sliding-window page table")
    T, page, window = params["tokens"], params["page"], params["window"]
    verify = params["mode"] == "target_verify"
    serving = serve(
        subject,
        mode=params["mode"],
        page_size=page,
        bs=GRAPH_BS,
        draft_tokens=T if verify else 0,
        tokens_per_req=T,
        swa=True,
    )
    serving.capture()
    generator = torch.Generator().manual_seed(subject.seed + page)
    problems: list[str] = []
    failed = 0
    for size in BATCH_SIZES:
        lengths = crossing_prefixes(page, 1, 2, size, generator, limit=400)
        batch = serving.admit(lengths)
        graph = serving.replay(batch)
        eager = serving.eager(batch)
        found = _judge_view("graph", graph, serving, batch, window) + _judge_view(
            "eager", eager, serving, batch, window
        )
        problems += found
        failed += bool(found)
    metrics = {"replays": float(len(BATCH_SIZES)), "failed_replays": float(failed)}
    if not problems:
        return ProbeResult(Outcome.PASS, metrics)
    return ProbeResult(Outcome.FAIL, metrics, signature=join(problems))


def _judge_view(label: str, view: MetadataView, serving: Serving, batch: Batch, window: int) -> list[str]:
    mapping = serving.backend._swa_kv_pool.full_to_swa_index_mapping
    page = serving.pool.page_size
    firsts, rows = [], []
    for req, kv_len in zip(batch.req_pool_indices.tolist(), batch.kv_lens):
        heads = serving.pool.req_to_token[req, :kv_len:page].long()
        first = max(0, kv_len - window) // page
        firsts.append(first)
        rows.append(mapping[heads[first:]] // page)
    found = window_differences(label, view.swa_page_table, firsts, rows)
    if view.swa_out_cache_loc is not None:
        tokens = batch.out_cache_loc.numel()
        written = field_difference("swa_out_cache_loc", view.swa_out_cache_loc[:tokens], mapping[batch.out_cache_loc])
        found += [f"{label} {written}"] if written else []
    return found
