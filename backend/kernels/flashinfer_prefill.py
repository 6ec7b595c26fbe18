"""FlashInfer's paged prefill wrapper (fa2 or fa3) computing target verify as a causal prefill.

Each request is a prefill of T query rows (``qo_indptr`` stride T) over its pages; ``causal=True``
aligns the mask bottom-right, which is the chain mask of the draft tokens. Under a CUDA graph the
wrapper owns fixed index buffers and is re-planned before every replay.
"""

from __future__ import annotations

import torch

from ..config import BackendConfig
from ..kv_pool import PagedKVPool
from ..metadata import ForwardMetadata
from .base import AttentionKernel


class PrefillWrapperAttention(AttentionKernel):
    def __init__(
        self,
        config: BackendConfig,
        kv_pool: PagedKVPool,
        workspace: torch.Tensor,
        flashinfer_backend: str,
        graph_batch_size: int | None = None,
    ) -> None:
        import flashinfer

        super().__init__()
        self.config = config
        self.kv_pool = kv_pool
        device = kv_pool.device
        graph_buffers = {}
        if graph_batch_size is not None:
            bs = graph_batch_size
            graph_buffers = dict(
                use_cuda_graph=True,
                qo_indptr_buf=torch.zeros(bs + 1, dtype=torch.int32, device=device),
                paged_kv_indptr_buf=torch.zeros(bs + 1, dtype=torch.int32, device=device),
                paged_kv_indices_buf=torch.zeros(bs * config.max_pages_per_req, dtype=torch.int32, device=device),
                paged_kv_last_page_len_buf=torch.zeros(bs, dtype=torch.int32, device=device),
            )
        self.wrapper = flashinfer.BatchPrefillWithPagedKVCacheWrapper(
            workspace, "HND", backend=flashinfer_backend, **graph_buffers
        )

    def plan(self, metadata: ForwardMetadata) -> None:
        super().plan(metadata)
        bs, q_len, page = metadata.batch_size, metadata.max_seq_len_q, self.config.page_size
        device = self.kv_pool.device
        kv_lens = metadata.cache_seqlens.to(torch.int32)
        num_pages = (kv_lens + page - 1) // page
        kv_indptr = torch.zeros(bs + 1, dtype=torch.int32, device=device)
        kv_indptr[1:] = torch.cumsum(num_pages, 0)
        columns = torch.arange(metadata.page_table.shape[1], device=device)
        kv_indices = metadata.page_table[columns[None, :] < num_pages[:, None]]
        last_page_len = kv_lens - (num_pages - 1) * page
        qo_indptr = torch.arange(0, (bs + 1) * q_len, q_len, dtype=torch.int32, device=device)
        self.wrapper.plan(
            qo_indptr,
            kv_indptr,
            kv_indices,
            last_page_len,
            self.config.num_q_heads,
            self.config.num_kv_heads,
            self.config.head_dim,
            page,
            causal=True,
            q_data_type=self.kv_pool.dtype,
            kv_data_type=self.kv_pool.dtype,
        )

    def run(self, q: torch.Tensor, out: torch.Tensor) -> None:
        metadata = self.planned()
        rows = metadata.batch_size * metadata.max_seq_len_q
        self.wrapper.run(q[:rows], (self.kv_pool.k_cache, self.kv_pool.v_cache), out=out[:rows])
