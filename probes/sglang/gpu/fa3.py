"""FA3's attention with the revision's replayed metadata, under a CUDA graph.

SGLang's FA3 backend calls sgl_kernel's ``flash_attn_with_kvcache``, which the GPU machine does
not have. This check stands in for that call with FlashInfer's FA3 kernels
(``BatchPrefillWithPagedKVCacheWrapper(backend="fa3")``, bottom-right causal, fixed CUDA-graph
buffers), fed from exactly what the revision's graph hands sgl_kernel: each request's query rows
from ``cu_seqlens_q``, its KV length from ``cache_seqlens_int32`` and its pages from
``page_table`` (the first ``ceil(kv / page)`` of its row), and the ``max_seq_len_q`` baked at
capture: rows past it are the rows sgl_kernel never computes, left unwritten.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from probes.api import ProbeContext, ProbeResult
from probes.sglang.backends.fa3 import ADAPTER
from probes.sglang.backends.fa3_read import FlashCalls
from probes.sglang.gpu import judge
from probes.sglang.gpu.reference import HEAD_DIM, KV_DTYPE, KV_HEADS, Q_HEADS, SM_SCALE, WORKSPACE_BYTES, Inputs
from probes.sglang.gpu.replayed import Replayed, Snapshot, frozen
from probes.sglang.session import Subject


@dataclass(frozen=True)
class PagedPlan:
    """A FlashInfer paged-prefill plan of the revision's FA3 metadata (CPU, int32)."""

    qo_indptr: torch.Tensor
    kv_indptr: torch.Tensor
    kv_indices: torch.Tensor
    last_page_len: torch.Tensor
    q_limit: int
    """``max_seq_len_q`` baked at capture: no request has more query rows computed."""

    def kv_slots(self, page_size: int) -> list[torch.Tensor]:
        """The token slots the plan reads for each request, in order."""
        slots = []
        for b in range(self.last_page_len.numel()):
            pages = self.kv_indices[int(self.kv_indptr[b]) : int(self.kv_indptr[b + 1])].long()
            tokens = (pages[:, None] * page_size + torch.arange(page_size)).flatten()
            cut = (pages.numel() - 1) * page_size + int(self.last_page_len[b]) if pages.numel() else 0
            slots.append(tokens[:cut])
        return slots


class FlashAttention3(judge.Kernel):
    adapter = ADAPTER
    library = "flashinfer"

    def extract(self, baked: FlashCalls, backend: Any) -> Snapshot:
        """At topk 1 one call reads it all (no cascade)."""
        return Snapshot(frozen(baked.prefix.buffers), {"max_seq_len_q": baked.prefix.q_limit})

    def arguments(self, replayed: Replayed, snapshot: Snapshot) -> PagedPlan:
        bs, page = replayed.shape.bs, replayed.shape.page_size
        tensors = snapshot.tensors
        page_table = tensors["page_table"][:bs]
        kv_lens = tensors["cache_seqlens_int32"][:bs].long().clamp(0, page_table.shape[1] * page)
        pages = (kv_lens + page - 1) // page
        rows = [page_table[b, : int(pages[b])] for b in range(bs)]
        limit = snapshot.scalars.get("max_seq_len_q")
        q_rows = torch.diff(tensors["cu_seqlens_q"][: bs + 1].long())
        return PagedPlan(
            qo_indptr=tensors["cu_seqlens_q"][: bs + 1].to(torch.int32),
            kv_indptr=torch.nn.functional.pad(torch.cumsum(pages, 0), (1, 0)).to(torch.int32),
            kv_indices=torch.cat(rows).to(torch.int32),
            last_page_len=torch.where(kv_lens > 0, kv_lens - (pages - 1) * page, 0).to(torch.int32),
            q_limit=int(limit) if isinstance(limit, int) else int(q_rows.max()),
        )

    def run(self, replayed: Replayed, inputs: Inputs, subject: Subject, device: torch.device) -> torch.Tensor:
        import flashinfer

        page = replayed.shape.page_size
        captured, live = (self.arguments(replayed, s) for s in (replayed.captured, replayed.replayed))
        bs = replayed.shape.bs
        rows = max(replayed.rows, int(captured.qo_indptr[-1]), int(live.qo_indptr[-1]))
        index_room = replayed.captured.tensors["page_table"][:bs].numel()
        buffers = {
            "qo_indptr_buf": torch.zeros(bs + 1, dtype=torch.int32, device=device),
            "paged_kv_indptr_buf": torch.zeros(bs + 1, dtype=torch.int32, device=device),
            "paged_kv_indices_buf": torch.zeros(index_room, dtype=torch.int32, device=device),
            "paged_kv_last_page_len_buf": torch.zeros(bs, dtype=torch.int32, device=device),
        }
        workspace = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device=device)
        wrapper = flashinfer.BatchPrefillWithPagedKVCacheWrapper(
            workspace, "NHD", use_cuda_graph=True, backend="fa3", **buffers
        )
        q = torch.zeros(rows, Q_HEADS, HEAD_DIM, dtype=KV_DTYPE, device=device)
        q[: inputs.q.shape[0]].copy_(inputs.q)
        cache = inputs.paged(page)

        def plan(arguments: PagedPlan) -> None:
            wrapper.plan(
                arguments.qo_indptr.to(device),
                arguments.kv_indptr.to(device),
                arguments.kv_indices.to(device),
                arguments.last_page_len.to(device),
                Q_HEADS,
                KV_HEADS,
                HEAD_DIM,
                page,
                causal=True,
                sm_scale=SM_SCALE,
                q_data_type=KV_DTYPE,
                kv_data_type=KV_DTYPE,
            )

        plan(captured)
        out = judge.in_graph(lambda: wrapper.run(q, cache), lambda: plan(live), device)
        return _rows_within(out, live)


def _rows_within(out: torch.Tensor, plan: PagedPlan) -> torch.Tensor:
    """``out`` with the rows past ``q_limit`` of each request zeroed: sgl_kernel's FA3 launches no
    more than ``max_seq_len_q`` query rows a request."""
    kept = out.clone()
    for b in range(plan.last_page_len.numel()):
        start, end = int(plan.qo_indptr[b]), int(plan.qo_indptr[b + 1])
        kept[start + plan.q_limit : end] = 0
    return kept


KERNEL = FlashAttention3()


def check(ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
    return judge.check(ctx, params, KERNEL)
