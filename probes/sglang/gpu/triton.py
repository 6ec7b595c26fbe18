"""The Triton backend's own attention kernels with the revision's replayed metadata, under a CUDA graph.

The revision is loaded with its real GPU libraries (``load_sglang(ctx, stub_gpu_libraries=False)``),
so ``decode_attention_fwd`` and ``extend_attention_fwd`` are the revision's triton kernels, from
wherever its era keeps them, while the metadata comes from its backend's CPU run (the loader puts
CPU versions in place of the metadata kernels only). Decode reads ``kv_indptr`` / ``kv_indices`` /
``num_kv_splits``; target verify and draft extend read the cached prefix through ``kv_indptr`` /
``kv_indices``, the query tokens' own K/V from the batch, ``qo_indptr``, the tree mask at
``mask_indptr`` and the ``max_extend_len`` baked at capture.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch

from probes.api import ProbeContext, ProbeResult, RevisionImportError
from probes.sglang.backends.base import Mode
from probes.sglang.backends.triton import ADAPTER
from probes.sglang.backends.triton_driven import Driven
from probes.sglang.backends.triton_read import TritonCall
from probes.sglang.gpu import judge
from probes.sglang.gpu.reference import HEAD_DIM, KV_DTYPE, Q_HEADS, SM_SCALE, Inputs, on_device
from probes.sglang.gpu.replayed import Replayed, Snapshot, frozen
from probes.sglang.loader import load_sglang
from probes.sglang.session import Subject

KERNEL_PACKAGES = ("sglang.kernels.ops.attention", "sglang.srt.layers.attention.triton_ops")
"""Where an era keeps its attention kernels, newest first."""
METADATA = ("kv_indptr", "kv_indices", "qo_indptr", "custom_mask", "mask_indptr")
"""The ``ForwardMetadata`` tensors the kernels read (extend's only where the mode extends)."""


@dataclass(frozen=True)
class TritonArguments:
    """The metadata tensors one kernel call is handed (CPU), and its Python scalars."""

    tensors: dict[str, torch.Tensor]
    max_extend_len: int | None
    max_kv_splits: int
    page_size: int


class TritonAttention(judge.Kernel):
    adapter = ADAPTER
    library = "triton"

    def prepare(self, ctx: ProbeContext) -> None:
        load_sglang(ctx, stub_gpu_libraries=False)

    def extract(self, baked: TritonCall, backend: Driven) -> Snapshot:
        tensors = {name: getattr(baked, name) for name in METADATA}
        tensors["num_kv_splits"] = getattr(backend.forward_metadata, "num_kv_splits", None)
        scalars = {
            "max_extend_len": baked.max_extend_len,
            "max_kv_splits": int(backend.backend.max_kv_splits),
            "page_size": int(backend.backend.page_size),
        }
        return Snapshot(frozen(tensors), scalars)

    def arguments(self, replayed: Replayed, snapshot: Snapshot) -> TritonArguments:
        bs = replayed.shape.bs
        tensors = dict(snapshot.tensors)
        for name in ("kv_indptr", "qo_indptr", "mask_indptr"):
            if name in tensors:
                tensors[name] = tensors[name][: bs + 1]
        max_splits = int(snapshot.scalars["max_kv_splits"])
        if "num_kv_splits" not in tensors:
            tensors["num_kv_splits"] = torch.full((bs,), max_splits, dtype=torch.int32)
        tensors["num_kv_splits"] = tensors["num_kv_splits"][:bs]
        page_size = int(snapshot.scalars["page_size"])
        return TritonArguments(tensors, snapshot.scalars["max_extend_len"], max_splits, page_size)

    def run(self, replayed: Replayed, inputs: Inputs, subject: Subject, device: torch.device) -> torch.Tensor:
        captured, live = (self.arguments(replayed, s) for s in (replayed.captured, replayed.replayed))
        static = on_device(captured.tensors, device)

        def rewrite() -> None:
            for name, tensor in live.tensors.items():
                static[name].copy_(tensor)

        if replayed.shape.mode is Mode.DECODE:
            call = _decode_call(kernel_function(subject, "decode_attention"), captured, static, inputs, device)
        else:
            call = _extend_call(kernel_function(subject, "extend_attention"), captured, static, inputs, replayed)
        return judge.in_graph(call, rewrite, device)


def kernel_function(subject: Subject, name: str) -> Callable[..., Any]:
    """The revision's ``<name>_fwd`` from the first kernel package of its era that has it."""
    for package in KERNEL_PACKAGES:
        try:
            module: ModuleType = subject.revision.module(f"{package}.{name}")
        except RevisionImportError:
            continue
        function = getattr(module, f"{name}_fwd", None)
        if function is not None:
            return function
    raise RevisionImportError(f"the revision has no {name}_fwd in {', '.join(KERNEL_PACKAGES)}")


def _page_keyword(function: Callable[..., Any], page_size: int) -> dict[str, int]:
    return {"page_size": page_size} if "page_size" in inspect.signature(function).parameters else {}


def _decode_call(
    function: Callable[..., Any],
    arguments: TritonArguments,
    static: dict[str, torch.Tensor],
    inputs: Inputs,
    device: torch.device,
) -> Callable[[], torch.Tensor]:
    bs, splits = inputs.q.shape[0], arguments.max_kv_splits
    out = torch.zeros_like(inputs.q)
    logits = torch.zeros(bs, Q_HEADS, splits, HEAD_DIM, dtype=torch.float32, device=device)
    lse = torch.zeros(bs, Q_HEADS, splits, dtype=torch.float32, device=device)
    extra = _page_keyword(function, arguments.page_size)

    def call() -> torch.Tensor:
        function(
            inputs.q,
            inputs.k,
            inputs.v,
            out,
            static["kv_indptr"],
            static["kv_indices"],
            logits,
            lse,
            static["num_kv_splits"],
            splits,
            SM_SCALE,
            1.0,
            1.0,
            **extra,
        )
        return out

    return call


def _extend_call(
    function: Callable[..., Any],
    arguments: TritonArguments,
    static: dict[str, torch.Tensor],
    inputs: Inputs,
    replayed: Replayed,
) -> Callable[[], torch.Tensor]:
    """The query tokens' own K/V are the batch's (the runner's static buffers), read from their slots."""
    own = replayed.batch.out_cache_loc.to(inputs.k.device)
    k_extend, v_extend = inputs.k[own].contiguous(), inputs.v[own].contiguous()
    out = torch.zeros(inputs.q.shape, dtype=KV_DTYPE, device=inputs.q.device)
    extra = _page_keyword(function, arguments.page_size)

    def call() -> torch.Tensor:
        function(
            inputs.q,
            k_extend,
            v_extend,
            out,
            inputs.k,
            inputs.v,
            static["qo_indptr"],
            static["kv_indptr"],
            static["kv_indices"],
            static.get("custom_mask"),
            True,
            static.get("mask_indptr"),
            arguments.max_extend_len,
            1.0,
            1.0,
            sm_scale=SM_SCALE,
            **extra,
        )
        return out

    return call


KERNEL = TritonAttention()


def check(ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
    return judge.check(ctx, params, KERNEL)
