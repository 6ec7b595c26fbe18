"""Attention kernels, chosen by name and device."""

from __future__ import annotations

import torch

from ..config import BackendConfig
from ..kv_pool import PagedKVPool
from .base import AttentionKernel
from .torch_paged import TorchPagedAttention

WORKSPACE_BYTES = 128 << 20


def resolve_kernel_name(config: BackendConfig, device: torch.device) -> str:
    """``auto`` is XQA on CUDA and the torch kernel elsewhere; FlashInfer kernels need CUDA."""
    if config.kernel == "auto":
        return "xqa" if device.type == "cuda" else "torch"
    if config.kernel != "torch" and device.type != "cuda":
        raise ValueError(f"kernel {config.kernel!r} needs a CUDA device; use kernel='torch' on {device.type}")
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
