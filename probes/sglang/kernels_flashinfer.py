"""CPU stand-ins for FlashInfer's wrapper classes, which SGLang's FlashInfer backend hands its
attention metadata to (the triton kernels it launches have their CPU versions in
``probes.sglang.kernels_triton``, shared with the Triton backend).

A wrapper's ``plan`` (alias ``begin_forward``) is where the metadata goes. A wrapper
made for CUDA graphs (``use_cuda_graph=True``) owns fixed buffers that ``plan`` rewrites in
place and that a captured kernel reads; ``fast_decode_plan`` (FlashInfer's, installed by SGLang
after capture) skips those copies, since SGLang writes the buffers itself. The stand-ins keep
FlashInfer's own checks (a fixed batch size, buffers large enough, a mask buffer for a mask) and
record the host-side values a plan was given.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import torch


class PlanRejected(ValueError):
    """FlashInfer refuses a plan (as its wrapper raises ValueError); ``phrase`` says why, stably."""

    def __init__(self, phrase: str, detail: str) -> None:
        super().__init__(f"{phrase}: {detail}")
        self.phrase = phrase


@dataclass
class PlanCall:
    """What one ``plan`` call was given on the host side."""

    page_size: int
    host_kv_indptr: torch.Tensor | None = None
    causal: bool = False
    custom_mask: bool = False
    total_rows: int | None = None
    fast: bool = False


def _packbits(
    mask: torch.Tensor, qo_indptr: torch.Tensor, kv_indptr: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """FlashInfer's ``segment_packbits`` of a flat bool mask (little bit order), one segment per
    request of ``q_len * kv_len`` bits; returns the packed bytes and their indptr."""
    q = (qo_indptr[1:] - qo_indptr[:-1]).tolist()
    kv = (kv_indptr[1:] - kv_indptr[:-1]).tolist()
    flat, packed, indptr, start = mask.reshape(-1).to(torch.uint8), [], [0], 0
    weights = 2 ** torch.arange(8, dtype=torch.int32)
    for rows, cols in zip(q, kv):
        bits = flat[start : start + rows * cols].to(torch.int32)
        start += rows * cols
        padded = torch.nn.functional.pad(bits, (0, (-bits.numel()) % 8))
        packed.append((padded.view(-1, 8) * weights).sum(1).to(torch.uint8))
        indptr.append(indptr[-1] + packed[-1].numel())
    return torch.cat(packed) if packed else torch.zeros(0, dtype=torch.uint8), torch.tensor(indptr, dtype=torch.int32)


@dataclass
class _Wrapper:
    """What the decode and prefill wrappers share: fixed buffers in CUDA-graph mode, or the
    tensors of the last plan otherwise."""

    use_cuda_graph: bool = False
    plans: list[PlanCall] = field(default_factory=list)

    @property
    def is_cuda_graph_enabled(self) -> bool:
        return self.use_cuda_graph

    def _check_fixed(self, batch_size: int, fixed: int, indices: torch.Tensor) -> None:
        if batch_size != fixed:
            raise PlanRejected("batch size differs from the graph's", f"{batch_size} for {fixed}")
        if len(indices) > len(self._paged_kv_indices_buf):  # type: ignore[attr-defined]
            raise PlanRejected("kv_indices exceed the graph's buffer", f"{len(indices)}")


class BatchDecodeWithPagedKVCacheWrapper(_Wrapper):
    """FlashInfer's paged decode wrapper: one query token per request."""

    def __init__(
        self,
        workspace: Any = None,
        kv_layout: str = "NHD",
        use_cuda_graph: bool = False,
        use_tensor_cores: bool = False,
        paged_kv_indptr_buffer: torch.Tensor | None = None,
        paged_kv_indices_buffer: torch.Tensor | None = None,
        paged_kv_last_page_len_buffer: torch.Tensor | None = None,
        **_: Any,
    ) -> None:
        super().__init__(use_cuda_graph)
        self.use_tensor_cores = use_tensor_cores
        self._paged_kv_indptr_buf = paged_kv_indptr_buffer
        self._paged_kv_indices_buf = paged_kv_indices_buffer
        self._paged_kv_last_page_len_buf = paged_kv_last_page_len_buffer
        self._fixed_batch_size = 0 if paged_kv_last_page_len_buffer is None else len(paged_kv_last_page_len_buffer)

    def plan(
        self, indptr: torch.Tensor, indices: torch.Tensor, last_page_len: torch.Tensor, *args: Any, **kwargs: Any
    ) -> None:
        if self.use_cuda_graph:
            self._check_fixed(len(last_page_len), self._fixed_batch_size, indices)
            self._paged_kv_indptr_buf.copy_(indptr)  # type: ignore[union-attr]
            self._paged_kv_last_page_len_buf.copy_(last_page_len)  # type: ignore[union-attr]
            self._paged_kv_indices_buf[: len(indices)].copy_(indices)  # type: ignore[index]
        else:
            self._paged_kv_indptr_buf, self._paged_kv_indices_buf = indptr, indices
            self._paged_kv_last_page_len_buf = last_page_len
        self.plans.append(PlanCall(_page_size(args, kwargs), indptr.cpu().clone()))

    begin_forward = plan


def fast_decode_plan(
    self: BatchDecodeWithPagedKVCacheWrapper,
    indptr: torch.Tensor,
    indices: torch.Tensor,
    last_page_len: torch.Tensor,
    *args: Any,
    global_override_indptr_cpu: torch.Tensor | None = None,
    **kwargs: Any,
) -> None:
    """FlashInfer's ``fast_decode_plan``: in CUDA-graph mode it checks the sizes and copies no
    buffer (SGLang wrote them); the host indptr is the override where one is given."""
    if self.use_cuda_graph:
        self._check_fixed(len(last_page_len), self._fixed_batch_size, indices)
    else:
        self._paged_kv_indptr_buf, self._paged_kv_indices_buf = indptr, indices
        self._paged_kv_last_page_len_buf = last_page_len
    host = global_override_indptr_cpu if global_override_indptr_cpu is not None else indptr.cpu()
    self.plans.append(PlanCall(_page_size(args, kwargs), host.clone(), fast=True))


def _page_size(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """``page_size`` of a plan call: after num_qo_heads, num_kv_heads, head_dim."""
    return int(kwargs.get("page_size", args[3] if len(args) > 3 else 1))


class _CachedModule:
    """What ``fast_prefill_plan`` hands its host layout to."""

    def __init__(self, owner: BatchPrefillWithPagedKVCacheWrapper) -> None:
        self.owner = owner

    def plan(self, *args: Any) -> list[int]:
        host_kv_indptr, total_rows, page_size, causal = args[4], args[6], args[10], args[14]
        plan = PlanCall(int(page_size), host_kv_indptr.clone(), bool(causal), False, int(total_rows), True)
        self.owner.plans.append(plan)
        return []


class BatchPrefillWithPagedKVCacheWrapper(_Wrapper):
    """FlashInfer's paged prefill wrapper (target verify and draft extend use it)."""

    def __init__(
        self,
        workspace: Any = None,
        kv_layout: str = "NHD",
        use_cuda_graph: bool = False,
        qo_indptr_buf: torch.Tensor | None = None,
        paged_kv_indptr_buf: torch.Tensor | None = None,
        paged_kv_indices_buf: torch.Tensor | None = None,
        paged_kv_last_page_len_buf: torch.Tensor | None = None,
        custom_mask_buf: torch.Tensor | None = None,
        mask_indptr_buf: torch.Tensor | None = None,
        backend: str = "auto",
        **_: Any,
    ) -> None:
        super().__init__(use_cuda_graph)
        self._qo_indptr_buf = qo_indptr_buf
        self._paged_kv_indptr_buf = paged_kv_indptr_buf
        self._paged_kv_indices_buf = paged_kv_indices_buf
        self._paged_kv_last_page_len_buf = paged_kv_last_page_len_buf
        self._custom_mask_buf = custom_mask_buf
        self._mask_indptr_buf = mask_indptr_buf
        self._fixed_batch_size = 0 if qo_indptr_buf is None else len(qo_indptr_buf) - 1
        self._backend = "fa2" if backend == "auto" else backend
        self._max_total_num_rows: int | None = None
        self._cached_module: _CachedModule | None = None
        self.device = torch.device("cpu")
        self._float_workspace_buffer = self._int_workspace_buffer = self._pin_memory_int_workspace_buffer = None

    def plan(
        self,
        qo_indptr: torch.Tensor,
        paged_kv_indptr: torch.Tensor,
        paged_kv_indices: torch.Tensor,
        paged_kv_last_page_len: torch.Tensor,
        num_qo_heads: int,
        num_kv_heads: int,
        head_dim_qk: int,
        page_size: int,
        head_dim_vo: int | None = None,
        custom_mask: torch.Tensor | None = None,
        packed_custom_mask: torch.Tensor | None = None,
        causal: bool = False,
        **_: Any,
    ) -> None:
        mask_indptr = None
        if packed_custom_mask is None and custom_mask is not None:
            packed_custom_mask, mask_indptr = _packbits(custom_mask, qo_indptr.cpu(), paged_kv_indptr.cpu())
        total_rows = int(qo_indptr[-1])
        if self.use_cuda_graph:
            self._plan_graph(qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len, total_rows)
            if packed_custom_mask is not None:
                if not isinstance(self._custom_mask_buf, torch.Tensor) or mask_indptr is None:
                    raise PlanRejected("custom mask without a graph mask buffer", "custom_mask_buf is not a tensor")
                self._custom_mask_buf[: len(packed_custom_mask)].copy_(packed_custom_mask)
                self._mask_indptr_buf.copy_(mask_indptr)  # type: ignore[union-attr]
        else:
            self._qo_indptr_buf, self._paged_kv_indptr_buf = qo_indptr, paged_kv_indptr
            self._paged_kv_indices_buf, self._paged_kv_last_page_len_buf = paged_kv_indices, paged_kv_last_page_len
            self._custom_mask_buf, self._mask_indptr_buf = packed_custom_mask, mask_indptr
        has_mask = packed_custom_mask is not None
        self.plans.append(PlanCall(int(page_size), paged_kv_indptr.cpu().clone(), causal, has_mask, total_rows))
        self._cached_module = _CachedModule(self)

    begin_forward = plan

    def _plan_graph(
        self, qo: torch.Tensor, kv: torch.Tensor, indices: torch.Tensor, last: torch.Tensor, total_rows: int
    ) -> None:
        self._check_fixed(len(last), self._fixed_batch_size, indices)
        if self._max_total_num_rows is None:
            self._max_total_num_rows = total_rows
        elif total_rows > self._max_total_num_rows:
            raise PlanRejected("more query rows than captured", f"{total_rows} > {self._max_total_num_rows}")
        self._qo_indptr_buf.copy_(qo)  # type: ignore[union-attr]
        self._paged_kv_indptr_buf.copy_(kv)  # type: ignore[union-attr]
        self._paged_kv_last_page_len_buf.copy_(last)  # type: ignore[union-attr]
        self._paged_kv_indices_buf[: len(indices)].copy_(indices)  # type: ignore[index]


class BatchPrefillWithRaggedKVCacheWrapper:
    """FlashInfer's ragged prefill wrapper: the extend part of a plain prefill, not judged here."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.plans: list[tuple[Any, ...]] = []

    def plan(self, *args: Any, **kwargs: Any) -> None:
        self.plans.append(args)

    begin_forward = plan


WRAPPERS: dict[str, Any] = {
    "BatchDecodeWithPagedKVCacheWrapper": BatchDecodeWithPagedKVCacheWrapper,
    "BatchPrefillWithPagedKVCacheWrapper": BatchPrefillWithPagedKVCacheWrapper,
    "BatchPrefillWithRaggedKVCacheWrapper": BatchPrefillWithRaggedKVCacheWrapper,
    "fast_decode_plan": fast_decode_plan,
}
"""FlashInfer names the backend module uses -> their stand-ins."""


def install(module: ModuleType) -> None:
    """Put the stand-ins in place of FlashInfer's names in the backend module's namespace (which
    binds them only where FlashInfer is available, so never on a CPU machine)."""
    for name, stand_in in WRAPPERS.items():
        setattr(module, name, stand_in)
