"""TRTLLM MHA (``trtllm_mha_backend.py``): the backend of DESIGN.md §1, as an :class:`Adapter`.

Its metadata record (``TRTLLMMHAMetadata``) holds what the TRTLLM-gen decode kernel reads:
``max_seq_len_q`` (the kernel's ``q_len_per_req``, a Python int a graph bakes in),
``cache_seqlens_int32`` (each request's KV length) and ``page_table``; ``cu_seqlens_k`` and, where
a revision keeps it, ``max_seq_len_k`` must agree with them. Draft decode is served by the same
class with ``speculative_step_id`` set (the multi-step draft backend only loops over such
sub-backends), topk 1 only.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch

from probes.sglang.backends.base import YES, Adapter, AttentionRead, Era, Mode, Shape, Support
from probes.sglang.eras import BACKEND_CLASS, GRAPH_METHODS, detect_era
from probes.sglang.fixture import DraftInput, Pool, VerifyInput, make_backend
from probes.sglang.graph import Baked

MULTI_STEP_CLASS = "TRTLLMHAAttnMultiStepDraftBackend"


@dataclass(frozen=True)
class Bound:
    """The buffers and scalars a call was handed, and the backend whose live metadata holds the
    rest (``max_seq_len_k`` only sizes copies; it is no kernel argument)."""

    baked: Baked
    backend: Any


class TrtllmMha(Adapter):
    name = "trtllm_mha"
    module = "sglang.srt.layers.attention.trtllm_mha_backend"
    backend_class = BACKEND_CLASS

    def era(self, module: ModuleType) -> Era:
        return detect_era(module)

    def supports(self, module: ModuleType, era: Era, shape: Shape) -> Support:
        if shape.topk > 1:
            return Support.no("topk > 1: the backend serves speculative decoding with topk 1 only")
        if shape.mode is Mode.DRAFT_DECODE and not isinstance(getattr(module, MULTI_STEP_CLASS, None), type):
            return Support.no(f"no draft decode: the module has no {MULTI_STEP_CLASS}")
        if shape.mode is Mode.DRAFT_EXTEND and not V2_DRAFT_EXTEND.search(_graph_source(module)):
            return Support.no("no draft-extend v2 CUDA graph: the graph metadata paths serve draft extend v1 at most")
        return YES

    def make(self, module: ModuleType, pool: Pool, shape: Shape, swa: Any = None) -> Any:
        return make_backend(
            module,
            pool,
            draft_tokens=shape.draft_tokens,
            max_bs=shape.bs,
            max_tokens_per_req=max(shape.tokens_per_req, shape.draft_tokens),
            swa=swa,
            step=shape.step,
        )

    def spec_info(self, module: ModuleType, shape: Shape, batch: Any) -> Any:
        if shape.mode is Mode.TARGET_VERIFY:
            return VerifyInput(shape.tokens_per_req)
        if shape.mode in (Mode.DRAFT_DECODE, Mode.DRAFT_EXTEND):
            return DraftInput(shape.topk, shape.tokens_per_req)
        return None

    def bake(self, backend: Any, shape: Shape) -> Bound:
        return Bound(Baked.capture(backend.forward_metadata), backend)

    def read(self, source: Bound, shape: Shape, rows: int, pool: Pool) -> AttentionRead:
        view = source.baked.read(source.backend.forward_metadata)
        problems: list[str] = []
        q_len = view.q_len if shape.mode in (Mode.TARGET_VERIFY, Mode.DRAFT_EXTEND) else 1
        if q_len is None:
            problems.append("max_seq_len_q missing")
        if view.cache_seqlens is None or view.page_table is None:
            return AttentionRead([], [], [], problems=[*problems, "cache_seqlens or page_table missing"])
        kv_lens = [int(n) for n in view.cache_seqlens[:rows].tolist()]
        if view.cu_seqlens_k is not None:
            running = torch.nn.functional.pad(torch.cumsum(torch.tensor(kv_lens, dtype=torch.long), 0), (1, 0))
            if not torch.equal(view.cu_seqlens_k[: rows + 1].long(), running):
                problems.append("cu_seqlens_k is not the running sum of cache_seqlens")
        if view.max_seq_len_k and kv_lens and view.max_seq_len_k < max(kv_lens):
            problems.append("max_seq_len_k below the longest KV")
        slots = [
            pages_to_slots(view.page_table[b], kv_len, pool.page_size, pool.req_to_token.shape[1])
            for b, kv_len in enumerate(kv_lens)
        ]
        return AttentionRead([q_len or -1] * rows, kv_lens, slots, problems=problems)


def pages_to_slots(row: torch.Tensor, kv_len: int, page_size: int, limit: int) -> torch.Tensor:
    """The token slots a paged call reads for ``kv_len`` tokens through the page-table ``row``."""
    kv_len = max(0, min(kv_len, limit, row.numel() * page_size))
    positions = torch.arange(kv_len)
    return row.long()[positions // page_size] * page_size + positions % page_size


V2_DRAFT_EXTEND = re.compile(r"is_draft_extend_v2\(\)|is_draft_extend\(include_v2=True\)")
"""How a graph path asks for a draft-extend v2 batch (the mode the probes judge)."""


def _graph_source(module: ModuleType) -> str:
    """The source of the backend class's own CUDA-graph metadata methods."""
    backend = getattr(module, BACKEND_CLASS, None)
    methods = [vars(backend).get(name) for name in GRAPH_METHODS] if isinstance(backend, type) else []
    try:
        return "".join(inspect.getsource(method) for method in methods if method is not None)
    except (OSError, TypeError):
        return ""


ADAPTER = TrtllmMha()
