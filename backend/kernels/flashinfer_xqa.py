"""FlashInfer's XQA kernel: the Hopper kin of SGLang's TRTLLM-gen decode call.

Target verify goes through the decode entry point with ``q_len_per_req`` = T and a packed causal
mask over the draft tokens; FlashInfer builds one JIT module per ``q_len_per_req``.
"""

from __future__ import annotations

import math

import torch

from ..config import BackendConfig
from ..kv_pool import PagedKVPool
from ..metadata import ForwardMetadata
from .base import AttentionKernel


def packed_causal_mask(batch_size: int, q_len: int, device: torch.device) -> torch.Tensor:
    """uint16 ``[batch_size, q_len, words]``: row i has bits 0..i set (the chain of draft tokens)."""
    words = ((q_len + 31) // 32) * 2
    bits = torch.zeros(q_len, words * 16, dtype=torch.bool)
    bits[:, :q_len] = torch.ones(q_len, q_len, dtype=torch.bool).tril()
    weights = 1 << torch.arange(16, dtype=torch.int32)
    packed = (bits.view(q_len, words, 16).int() * weights).sum(-1)
    return packed.to(torch.uint16).expand(batch_size, q_len, words).contiguous().to(device)


class XqaAttention(AttentionKernel):
    def __init__(self, config: BackendConfig, kv_pool: PagedKVPool, workspace: torch.Tensor) -> None:
        super().__init__()
        self.config = config
        self.kv_pool = kv_pool
        self.workspace = workspace
        self.mask: torch.Tensor | None = None

    def plan(self, metadata: ForwardMetadata) -> None:
        super().plan(metadata)
        shape = (metadata.batch_size, metadata.max_seq_len_q)
        if metadata.max_seq_len_q > 1 and (self.mask is None or tuple(self.mask.shape[:2]) != shape):
            self.mask = packed_causal_mask(*shape, self.kv_pool.device)

    def run(self, q: torch.Tensor, out: torch.Tensor) -> None:
        from flashinfer.decode import trtllm_batch_decode_with_kv_cache

        metadata = self.planned()
        rows = metadata.batch_size * metadata.max_seq_len_q
        trtllm_batch_decode_with_kv_cache(
            query=q[:rows],
            kv_cache=(self.kv_pool.k_cache, self.kv_pool.v_cache),
            workspace_buffer=self.workspace,
            block_tables=metadata.page_table,
            seq_lens=metadata.cache_seqlens,
            max_seq_len=self.config.max_context_len,
            bmm1_scale=1.0 / math.sqrt(self.config.head_dim),
            bmm2_scale=1.0,
            out=out[:rows],
            q_len_per_req=metadata.max_seq_len_q,
            mask=self.mask if metadata.max_seq_len_q > 1 else None,
            backend="xqa",
            kv_layout="HND",
        )
