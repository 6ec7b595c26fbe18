"""SGLang TRTLLM MHA target-verify CUDA-graph metadata with T != N, after capture and replays.

The backend is configured for N draft tokens; the graph is captured for batches of T tokens per
request (the captured request shape) and replayed for new requests, some batches padded. What the
graph's attention call reads must equal the closed form (q length T, KV ``seq_lens + T``, the
pages of those KV lengths) right after capture and after every replay; the eager path of the
same revision is judged the same way. A revision whose eager path itself gives every request N
tokens, with its graph path agreeing, cannot serve T != N at all (it predates it): unsupported,
not a regression, in every case (the T == N control asks the eager path first).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from probes.api import ProbeContext, ProbeResult
from probes.demo_backend.checks import field_difference
from probes.sglang.checks import Expected, differences, join, kv_offset
from probes.sglang.eras import supports_decoupled_q_len
from probes.sglang.fixture import crossing_prefixes
from probes.sglang.session import UNSUPPORTED, Subject, guarded, serve
from tracker.core.verdicts import Outcome

GRAPH_BS = 4
BATCH_SIZES = (4, 3, 4, 2)
"""Live batch sizes of the replays: full and padded batches."""


def check(ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
    return guarded(ctx, lambda subject: judge(subject, params))


def judge(subject: Subject, params: Mapping[str, Any]) -> ProbeResult:
    N, T = params["draft_tokens"], params["tokens_per_req"]
    if T == N and not _eager_honours_other_lengths(subject, N, params["pages"][0]):
        return _unsupported(subject, N, N // 2)
    problems: list[str] = []
    replays = failed = 0
    for page in params["pages"]:
        outcome = _one_page_size(subject, N, T, page)
        if isinstance(outcome, ProbeResult):
            return outcome
        page_problems, page_replays, page_failed = outcome
        problems += page_problems
        replays, failed = replays + page_replays, failed + page_failed
    metrics = {"replays": float(replays), "failed_replays": float(failed)}
    if not problems:
        return ProbeResult(Outcome.PASS, metrics)
    return ProbeResult(Outcome.FAIL, metrics, signature=join(problems))


def _one_page_size(subject: Subject, N: int, T: int, page: int) -> tuple[list[str], int, int] | ProbeResult:
    serving = serve(subject, mode="target_verify", page_size=page, bs=GRAPH_BS, draft_tokens=N, tokens_per_req=T)
    baked = serving.capture()
    problems = [
        f"capture {d}" for d in [field_difference("max_seq_len_q", -1 if baked.q_len is None else baked.q_len, T)] if d
    ]
    generator = torch.Generator().manual_seed(subject.seed + page)
    failed = 0
    for size in BATCH_SIZES:
        batch = serving.admit(crossing_prefixes(page, min(T, N), max(T, N), size, generator))
        expected = Expected(T, batch.kv_lens, serving.pool.page_rows(batch.req_pool_indices, batch.kv_lens))
        graph = serving.replay(batch)
        eager = serving.eager(batch)
        eager_shape = (eager.q_len, kv_offset(eager, batch.seq_lens))
        graph_shape = (graph.q_len, kv_offset(graph, batch.seq_lens))
        if not supports_decoupled_q_len(*eager_shape, T, N) and graph_shape == eager_shape:
            return _unsupported(subject, N, T)
        found = differences("graph", graph, expected) + differences("eager", eager, expected)
        problems += found
        failed += bool(found)
    return problems, len(BATCH_SIZES), failed


def _eager_honours_other_lengths(subject: Subject, N: int, page: int) -> bool:
    """Whether the eager path gives a batch of T = N // 2 tokens per request T tokens: where it
    does not, the revision predates T != N and the T == N control is no control of it."""
    T = N // 2
    serving = serve(subject, mode="target_verify", page_size=page, bs=GRAPH_BS, draft_tokens=N, tokens_per_req=T)
    generator = torch.Generator().manual_seed(subject.seed + page)
    batch = serving.admit(crossing_prefixes(page, T, N, GRAPH_BS, generator))
    eager = serving.eager(batch)
    return supports_decoupled_q_len(eager.q_len, kv_offset(eager, batch.seq_lens), T, N)


def _unsupported(subject: Subject, N: int, T: int) -> ProbeResult:
    era = "A1" if subject.era.label == "A" else subject.era.label
    return ProbeResult(
        Outcome.SKIP,
        signature=f"{UNSUPPORTED}: the eager path gives every request N={N} tokens, not the batch's T={T} "
        f"(era {era}: T != N predates it)",
    )
