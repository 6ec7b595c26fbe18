"""SGLang target-verify attention under a real CUDA graph, with the revision's replayed metadata.

The revision's target-verify graph metadata for the fixed scenario (``probes.sglang.scenario``:
bs 4, T 2, N 4, prefixes 10/37/3/100, page 16) is computed on the CPU. FlashInfer's XQA decode
kernel, the Hopper kin of SGLang's TRTLLM-gen call (the same arguments plus a packed causal
mask), then runs with exactly that metadata under a ``torch.cuda.CUDAGraph``: ``q_len_per_req``
is the baked ``max_seq_len_q``, ``seq_lens`` the graph's ``cache_seqlens``, ``block_tables`` its
page table. The output rows of the batch's true T tokens per request are compared with an fp32
reference built from the true shapes. Wrong metadata shows as wrong attention (rows reading
another request's KV, stale slots, unwritten rows), silently.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Mapping
from types import ModuleType
from typing import Any

import torch

from probes.api import ProbeContext, ProbeResult
from probes.demo_backend.checks import (
    attention_metrics,
    attention_signature,
    attention_verdict,
    tolerance_for,
)
from probes.demo_backend.reference import reference_attention
from probes.sglang.fixture import MAX_CONTEXT_LEN
from probes.sglang.scenario import ReplayedMetadata, replay_scenario
from probes.sglang.session import Subject, guarded
from tracker.core.verdicts import Outcome

NUM_Q_HEADS, NUM_KV_HEADS, HEAD_DIM = 8, 2, 128
WORKSPACE_BYTES = 128 << 20
KV_DTYPE = torch.bfloat16


def check(ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
    if not (ctx.is_cuda and torch.cuda.is_available()):
        return ProbeResult(Outcome.SKIP, detail="needs a CUDA device")
    decode = _flashinfer_decode()
    if decode is None:
        return ProbeResult(Outcome.SKIP, detail="flashinfer is not installed")
    return guarded(ctx, lambda subject: judge(subject, decode, ctx))


def _flashinfer_decode() -> ModuleType | None:
    """The real ``flashinfer.decode``, imported before the revision loads (a module imported
    while it is loaded would be its stub)."""
    try:
        return importlib.import_module("flashinfer.decode")
    except ImportError:
        return None


def judge(subject: Subject, decode: ModuleType, ctx: ProbeContext) -> ProbeResult:
    meta = replay_scenario(subject)
    if meta.q_len is None or meta.q_len < 1:
        return ProbeResult(Outcome.FAIL, signature=f"no usable baked max_seq_len_q ({meta.q_len})")
    device = torch.device(ctx.device)
    inputs = _inputs(meta, device, ctx.seed)
    out = _run_in_graph(decode, meta, inputs, device)
    rows = len(meta.kv_lens) * meta.tokens_per_req
    reference = reference_attention(
        meta.req_to_token.to(device),
        inputs["k_cache"],
        inputs["v_cache"],
        meta.req_pool_indices.tolist(),
        meta.kv_lens,
        inputs["q"],
        meta.tokens_per_req,
        torch.float32,
    )
    tolerance = tolerance_for("bfloat16")
    metrics = attention_metrics(out[:rows], reference, tolerance)
    metrics["baked_q_len"] = float(meta.q_len)
    outcome = attention_verdict(metrics, tolerance)
    return ProbeResult(outcome, metrics, signature=attention_signature(metrics, tolerance), detail=_describe(meta))


def _inputs(meta: ReplayedMetadata, device: torch.device, seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator(device=device).manual_seed(seed)
    shape = (meta.num_pages, NUM_KV_HEADS, meta.page_size, HEAD_DIM)
    rows = len(meta.kv_lens) * meta.tokens_per_req
    return {
        "k_cache": torch.randn(shape, generator=generator, device=device).to(KV_DTYPE),
        "v_cache": torch.randn(shape, generator=generator, device=device).to(KV_DTYPE),
        "q": torch.randn(rows, NUM_Q_HEADS, HEAD_DIM, generator=generator, device=device).to(KV_DTYPE),
    }


def _run_in_graph(
    decode: ModuleType, meta: ReplayedMetadata, inputs: dict[str, torch.Tensor], device: torch.device
) -> torch.Tensor:
    """One XQA call with the revision's metadata, captured in a CUDA graph and replayed; the
    query buffer holds the batch's rows first, as SGLang's static buffers do, and the call reads
    as many rows as the baked q length says."""
    bs, q_len = len(meta.kv_lens), int(meta.q_len or 1)
    rows = bs * max(meta.tokens_per_req, q_len)
    static_q = torch.zeros(rows, NUM_Q_HEADS, HEAD_DIM, dtype=KV_DTYPE, device=device)
    static_q[: inputs["q"].shape[0]].copy_(inputs["q"])
    static_out = torch.zeros_like(static_q)
    arguments = dict(
        query=static_q[: bs * q_len],
        kv_cache=(inputs["k_cache"], inputs["v_cache"]),
        workspace_buffer=torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device=device),
        block_tables=meta.page_table.to(device=device, dtype=torch.int32),
        seq_lens=meta.cache_seqlens.to(device=device, dtype=torch.int32),
        max_seq_len=MAX_CONTEXT_LEN,
        bmm1_scale=1.0 / math.sqrt(HEAD_DIM),
        bmm2_scale=1.0,
        out=static_out[: bs * q_len],
        q_len_per_req=q_len,
        mask=packed_causal_mask(bs, q_len, device) if q_len > 1 else None,
        backend="xqa",
        kv_layout="HND",
    )
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        decode.trtllm_batch_decode_with_kv_cache(**arguments)
    torch.cuda.current_stream(device).wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        decode.trtllm_batch_decode_with_kv_cache(**arguments)
    static_out.zero_()
    graph.replay()
    torch.cuda.synchronize(device)
    return static_out


def packed_causal_mask(batch_size: int, q_len: int, device: torch.device) -> torch.Tensor:
    """uint16 ``[batch_size, q_len, ((q_len + 31) // 32) * 2]``: query row i may see draft
    tokens 0..i, as bits 0..i of its row (16 bits a word, low bit first)."""
    words = ((q_len + 31) // 32) * 2
    allowed = torch.zeros(q_len, words * 16, dtype=torch.int32)
    allowed[:, :q_len] = torch.tril(torch.ones(q_len, q_len, dtype=torch.int32))
    packed = (allowed.view(q_len, words, 16) << torch.arange(16, dtype=torch.int32)).sum(-1)
    return packed.to(torch.uint16).expand(batch_size, q_len, words).contiguous().to(device)


def _describe(meta: ReplayedMetadata) -> str:
    return (
        f"era {meta.era}: baked q_len {meta.q_len} (T={meta.tokens_per_req}, N={meta.draft_tokens}), "
        f"cache_seqlens {meta.cache_seqlens.tolist()} (true KV {meta.kv_lens})"
    )
