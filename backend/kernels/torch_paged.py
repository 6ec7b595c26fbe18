"""A plain torch paged-attention kernel: the CPU implementation, usable on any device."""

from __future__ import annotations

import math

import torch

from ..config import BackendConfig, ceil_div
from ..kv_pool import PagedKVPool
from .base import AttentionKernel


class TorchPagedAttention(AttentionKernel):
    """Causal attention of each request's query rows over the pages its page table lists.

    Query row i of a request with KV length L sits at position L - q_len + i and sees keys
    0..that position (bottom-right aligned causal mask, as XQA's packed mask and FlashInfer's
    ``causal=True`` give). Computes in float32, or float64 for float64 inputs.
    """

    def __init__(self, config: BackendConfig, kv_pool: PagedKVPool) -> None:
        super().__init__()
        self.config = config
        self.kv_pool = kv_pool

    def run(self, q: torch.Tensor, out: torch.Tensor) -> None:
        metadata = self.planned()
        q_len, page = metadata.max_seq_len_q, self.config.page_size
        group = self.config.num_q_heads // self.config.num_kv_heads
        compute_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
        scale = 1.0 / math.sqrt(self.config.head_dim)
        for b, kv_len in enumerate(metadata.cache_seqlens.tolist()):
            pages = metadata.page_table[b, : ceil_div(kv_len, page)].long()
            k = self._gather(self.kv_pool.k_cache, pages, kv_len).to(compute_dtype)
            v = self._gather(self.kv_pool.v_cache, pages, kv_len).to(compute_dtype)
            rows = slice(b * q_len, (b + 1) * q_len)
            qb = q[rows].to(compute_dtype).unflatten(1, (self.config.num_kv_heads, group))
            scores = torch.einsum("qhgd,khd->hgqk", qb, k) * scale
            query_pos = torch.arange(kv_len - q_len, kv_len, device=q.device)
            key_pos = torch.arange(kv_len, device=q.device)
            scores = scores.masked_fill(key_pos[None, :] > query_pos[:, None], float("-inf"))
            ob = torch.einsum("hgqk,khd->qhgd", scores.softmax(-1), v)
            out[rows] = ob.flatten(1, 2).to(out.dtype)

    @staticmethod
    def _gather(cache: torch.Tensor, pages: torch.Tensor, kv_len: int) -> torch.Tensor:
        """``[kv_len, num_kv_heads, head_dim]`` from pages laid out ``[page, head, slot, dim]``."""
        return cache[pages].permute(0, 2, 1, 3).flatten(0, 1)[:kv_len]
