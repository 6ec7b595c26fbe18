"""Attention kernels, chosen by name and device."""

from __future__ import annotations

import torch

from ..config import BackendConfig
from ..kv_pool import PagedKVPool
from .base import AttentionKernel
from .torch_paged import TorchPagedAttention

WORKSPACE_BYTES = 128 << 20
XQA_PAGE_SIZES = (16, 32, 64, 128)


def resolve_kernel_name(config: BackendConfig, device: torch.device) -> str:
    """``auto``: XQA on CUDA where it supports the page size, else fa2; the torch kernel off CUDA."""
    if config.kernel == "auto":
        if device.type != "cuda":
            return "torch"
        return "xqa" if config.page_size in XQA_PAGE_SIZES else "fa2"
    if config.kernel != "torch" and device.type != "cuda":
        raise ValueError(f"kernel {config.kernel!r} needs a CUDA device; use kernel='torch' on {device.type}")
    if config.kernel == "xqa" and config.page_size not in XQA_PAGE_SIZES:
        raise ValueError(f"XQA supports page sizes {XQA_PAGE_SIZES}, not {config.page_size}; use kernel='fa2'")
    return config.kernel


def make_kernel(
    name: str,
    config: BackendConfig,
    kv_pool: PagedKVPool,
    workspace: torch.Tensor | None,
    graph_batch_size: int | None = None,
) -> AttentionKernel:
    """A kernel instance; ``graph_batch_size`` gives it the fixed buffers a CUDA graph needs."""
    if name == "torch":
        return TorchPagedAttention(config, kv_pool)
    assert workspace is not None, "FlashInfer kernels need a workspace buffer"
    if name == "xqa":
        from .flashinfer_xqa import XqaAttention

        return XqaAttention(config, kv_pool, workspace)
    from .flashinfer_prefill import PrefillWrapperAttention

    return PrefillWrapperAttention(config, kv_pool, workspace, name, graph_batch_size)


__all__ = ["AttentionKernel", "TorchPagedAttention", "make_kernel", "resolve_kernel_name", "WORKSPACE_BYTES"]
