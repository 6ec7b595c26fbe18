"""FlashInfer's wrappers, as SGLang's FlashInfer backend plans them, with the revision's replayed
metadata under a CUDA graph.

The backend hands each wrapper's ``plan`` the request layout, which a wrapper made for CUDA graphs
copies into fixed buffers that the captured kernel reads. Here the real wrappers (decode for
decode; paged prefill for target verify, with the backend's custom mask, and for draft
extend) get fixed buffers of their own, are planned with what the revision's wrappers held at
capture, captured, and replanned with what they held after the scenario's replay (``qo_indptr``,
``kv_indptr``, ``kv_indices``, ``last_page_len``, the mask, the plan's page size and
causality) before ``graph.replay()``.

The mask is handed unpacked, as SGLang hands it (``custom_mask=``): given a packed mask instead,
FlashInfer 0.7.2 keeps ``mask_indptr`` in bits where its kernel reads bytes, so every request
after the first would read another request's bits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from probes.api import ProbeContext, ProbeResult
from probes.sglang.backends import flashinfer_read as read_buffers
from probes.sglang.backends.flashinfer import ADAPTER, Served, WrapperRead
from probes.sglang.gpu import judge
from probes.sglang.gpu.reference import HEAD_DIM, KV_DTYPE, KV_HEADS, Q_HEADS, SM_SCALE, WORKSPACE_BYTES, Inputs
from probes.sglang.gpu.replayed import Replayed, Snapshot, frozen
from probes.sglang.session import Subject


@dataclass(frozen=True)
class WrapperPlan:
    """One ``plan`` of a FlashInfer wrapper from the revision's buffers (CPU)."""

    kv_indptr: torch.Tensor
    kv_indices: torch.Tensor
    last_page_len: torch.Tensor
    page_size: int
    qo_indptr: torch.Tensor | None = None
    """Prefill only."""
    custom_mask: torch.Tensor | None = None
    """Prefill only: the requests' masks, flat and unpacked."""
    causal: bool = False

    def keywords(self) -> dict[str, Any]:
        """The plan's keyword arguments beyond the layout."""
        found: dict[str, Any] = {"sm_scale": SM_SCALE, "q_data_type": KV_DTYPE, "kv_data_type": KV_DTYPE}
        if self.qo_indptr is not None:
            found["causal"] = self.causal
            if self.custom_mask is not None:
                found["custom_mask"] = self.custom_mask
        return found


class FlashInferAttention(judge.Kernel):
    adapter = ADAPTER
    library = "flashinfer"

    def extract(self, baked: WrapperRead, backend: Served) -> Snapshot:
        metadata = backend.forward_metadata
        wrappers = getattr(metadata, "prefill_wrappers", None) or getattr(metadata, "decode_wrappers", None) or []
        plans = getattr(wrappers[0], "plans", []) if wrappers else []
        last = plans[-1] if plans else None
        scalars = {
            "page_size": baked.page_size,
            "prefill": baked.prefill,
            "causal": bool(last and last.causal),
            "mask": bool(last and last.custom_mask),
        }
        return Snapshot(frozen(baked.buffers), scalars)

    def arguments(self, replayed: Replayed, snapshot: Snapshot) -> WrapperPlan:
        bs, tensors, scalars = replayed.shape.bs, snapshot.tensors, snapshot.scalars
        kv_indptr = tensors["kv_indptr"][: bs + 1].to(torch.int32)
        plan = WrapperPlan(
            kv_indptr=kv_indptr,
            kv_indices=tensors["kv_indices"][: int(kv_indptr[-1])].to(torch.int32),
            last_page_len=tensors["last_page_len"][:bs].to(torch.int32),
            page_size=int(scalars["page_size"]),
        )
        if not scalars["prefill"]:
            return plan
        qo_indptr = tensors["qo_indptr"][: bs + 1].to(torch.int32)
        mask = None
        if scalars["mask"] and "mask" in tensors and "mask_indptr" in tensors:
            mask = _unpacked_mask(tensors["mask"], tensors["mask_indptr"], qo_indptr, plan)
        return WrapperPlan(
            kv_indptr, plan.kv_indices, plan.last_page_len, plan.page_size, qo_indptr, mask, bool(scalars["causal"])
        )

    def run(self, replayed: Replayed, inputs: Inputs, subject: Subject, device: torch.device) -> torch.Tensor:
        captured, live = (self.arguments(replayed, s) for s in (replayed.captured, replayed.replayed))
        wrapper = _wrapper(replayed, captured, device)
        totals = [int(p.qo_indptr[-1]) for p in (captured, live) if p.qo_indptr is not None]
        q = torch.zeros(max([replayed.rows, *totals]), Q_HEADS, HEAD_DIM, dtype=KV_DTYPE, device=device)
        q[: inputs.q.shape[0]].copy_(inputs.q)
        cache = inputs.paged(captured.page_size)

        def plan(arguments: WrapperPlan) -> None:
            layout = [arguments.kv_indptr, arguments.kv_indices, arguments.last_page_len]
            if arguments.qo_indptr is not None:
                layout.insert(0, arguments.qo_indptr)
            wrapper.plan(
                *(t.to(device) for t in layout),
                Q_HEADS,
                KV_HEADS,
                HEAD_DIM,
                arguments.page_size,
                **{k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in arguments.keywords().items()},
            )

        plan(captured)
        return judge.in_graph(lambda: wrapper.run(q, cache), lambda: plan(live), device)


def _wrapper(replayed: Replayed, plan: WrapperPlan, device: torch.device) -> Any:
    """A wrapper for CUDA graphs with fixed buffers as large as the revision's."""
    import flashinfer

    bs, tensors = replayed.shape.bs, replayed.captured.tensors
    workspace = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device=device)
    indptr = torch.zeros(bs + 1, dtype=torch.int32, device=device)
    indices = torch.zeros(tensors["kv_indices"].numel(), dtype=torch.int32, device=device)
    last = torch.zeros(bs, dtype=torch.int32, device=device)
    if plan.qo_indptr is None:
        return flashinfer.BatchDecodeWithPagedKVCacheWrapper(
            workspace,
            "NHD",
            use_cuda_graph=True,
            paged_kv_indptr_buffer=indptr,
            paged_kv_indices_buffer=indices,
            paged_kv_last_page_len_buffer=last,
        )
    masked = {}
    if plan.custom_mask is not None:
        masked = {
            "custom_mask_buf": torch.zeros(tensors["mask"].numel(), dtype=torch.uint8, device=device),
            "mask_indptr_buf": torch.zeros(bs + 1, dtype=torch.int32, device=device),
        }
    return flashinfer.BatchPrefillWithPagedKVCacheWrapper(
        workspace,
        "NHD",
        use_cuda_graph=True,
        qo_indptr_buf=torch.zeros(bs + 1, dtype=torch.int32, device=device),
        paged_kv_indptr_buf=indptr,
        paged_kv_indices_buf=indices,
        paged_kv_last_page_len_buf=last,
        backend="fa2",
        **masked,
    )


def _unpacked_mask(
    packed: torch.Tensor, mask_indptr: torch.Tensor, qo_indptr: torch.Tensor, plan: WrapperPlan
) -> torch.Tensor:
    """The flat bool mask SGLang would hand ``plan``, from the revision's packed bytes."""
    bs = qo_indptr.numel() - 1
    kv_lens = read_buffers.layout(plan.kv_indptr, plan.kv_indices, plan.last_page_len, plan.page_size, bs).kv_lens
    q_lens = (qo_indptr[1:] - qo_indptr[:-1]).tolist()
    segments = [
        read_buffers.unpacked(packed[int(mask_indptr[r]) : int(mask_indptr[r + 1])], q_lens[r] * kv_lens[r])
        for r in range(bs)
    ]
    return torch.cat(segments)


KERNEL = FlashInferAttention()


def check(ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
    return judge.check(ctx, params, KERNEL)
