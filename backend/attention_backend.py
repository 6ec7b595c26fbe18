"""The paged attention backend: eager metadata, CUDA-graph metadata, and the forward call.

Its shape follows SGLang's TRTLLM MHA backend. The eager path builds fresh metadata for each
batch. The graph path keeps fixed buffers per forward mode; for each captured batch size a
*build* step (capture only) makes views into them and fixes the query length, then an *apply*
step (capture and every replay) rewrites them in place for the live requests.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .config import BackendConfig, ceil_div
from .forward_mode import ForwardMode
from .kernels import WORKSPACE_BYTES, AttentionKernel, make_kernel, resolve_kernel_name
from .kv_pool import PagedKVPool
from .metadata import ForwardBatch, ForwardMetadata


@dataclass
class GraphStateBuffers:
    """Fixed buffers one forward mode's captured graphs read, sized for the largest batch."""

    cache_seqlens: torch.Tensor
    cu_seqlens_q: torch.Tensor
    cu_seqlens_k: torch.Tensor
    page_table: torch.Tensor
    swa_page_table: torch.Tensor | None


class PagedAttentionBackend:
    def __init__(self, config: BackendConfig, kv_pool: PagedKVPool) -> None:
        self.config = config
        self.kv_pool = kv_pool
        self.device = kv_pool.device
        self.page_size = config.page_size
        self.speculative_num_draft_tokens = config.speculative_num_draft_tokens
        self.kernel_name = resolve_kernel_name(config, self.device)
        self.workspace = (
            torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device=self.device) if self.kernel_name != "torch" else None
        )
        self.eager_kernel = make_kernel(self.kernel_name, config, kv_pool, self.workspace)
        self.graph_state: dict[ForwardMode, GraphStateBuffers] = {}
        self.graph_metadata: dict[tuple[ForwardMode, int], ForwardMetadata] = {}
        self.graph_kernels: dict[tuple[ForwardMode, int], AttentionKernel] = {}
        self.forward_metadata: ForwardMetadata | None = None
        self.forward_kernel: AttentionKernel | None = None

    # ------------------------------------------------------------------ eager path

    def init_forward_metadata(self, batch: ForwardBatch) -> None:
        """Fresh metadata for ``batch``; the reference every graph replay must agree with."""
        q_len = 1 if batch.forward_mode is ForwardMode.DECODE else batch.tokens_per_req
        seq_lens = batch.seq_lens.to(device=self.device, dtype=torch.int32)
        cache_seqlens = seq_lens + batch.forward_mode.kv_tokens_added(q_len)
        max_seq_len_k = int(cache_seqlens.max())
        num_pages = ceil_div(max_seq_len_k, self.page_size)
        page_table = torch.zeros(batch.batch_size, num_pages, dtype=torch.int32, device=self.device)
        page_table.copy_(self._page_table_rows(batch.req_pool_indices, num_pages))
        metadata = ForwardMetadata(
            cache_seqlens=cache_seqlens,
            cu_seqlens_q=torch.arange(0, (batch.batch_size + 1) * q_len, q_len, dtype=torch.int32, device=self.device),
            cu_seqlens_k=torch.nn.functional.pad(torch.cumsum(cache_seqlens, 0, dtype=torch.int32), (1, 0)),
            max_seq_len_q=q_len,
            max_seq_len_k=max_seq_len_k,
            page_table=page_table,
        )
        if self.config.sliding_window is not None:
            metadata.swa_page_table = torch.zeros_like(page_table)
            self._translate_swa_page_table(metadata, metadata.max_seq_len_k)
        self.eager_kernel.plan(metadata)
        self.forward_metadata, self.forward_kernel = metadata, self.eager_kernel

    # ------------------------------------------------------------------ CUDA-graph path

    def init_cuda_graph_state(self, max_bs: int) -> None:
        """Allocate the fixed buffers of every forward mode for batches of up to ``max_bs``."""
        pages = self.config.max_pages_per_req

        def buffers() -> GraphStateBuffers:
            def ints(*shape: int) -> torch.Tensor:
                return torch.zeros(*shape, dtype=torch.int32, device=self.device)

            swa = ints(max_bs, pages) if self.config.sliding_window is not None else None
            return GraphStateBuffers(ints(max_bs), ints(max_bs + 1), ints(max_bs + 1), ints(max_bs, pages), swa)

        self.graph_state = {mode: buffers() for mode in ForwardMode}
        self.graph_metadata.clear()
        self.graph_kernels.clear()

    def init_forward_metadata_capture_cuda_graph(
        self,
        bs: int,
        num_tokens: int,
        req_pool_indices: torch.Tensor,
        seq_lens: torch.Tensor,
        forward_mode: ForwardMode,
    ) -> None:
        """Build the metadata of batch size ``bs`` (capture only), then apply it like a replay."""
        key = (forward_mode, bs)
        self.graph_metadata[key] = self._build_graph_metadata(bs, num_tokens, forward_mode)
        self.graph_kernels[key] = make_kernel(
            self.kernel_name, self.config, self.kv_pool, self.workspace, graph_batch_size=bs
        )
        self._apply_graph_metadata(key, req_pool_indices, seq_lens)

    def init_forward_metadata_replay_cuda_graph(
        self,
        bs: int,
        req_pool_indices: torch.Tensor,
        seq_lens: torch.Tensor,
        forward_mode: ForwardMode,
    ) -> None:
        key = (forward_mode, bs)
        if key not in self.graph_metadata:
            raise KeyError(f"no graph captured for {forward_mode.value} at batch size {bs}")
        self._apply_graph_metadata(key, req_pool_indices, seq_lens)

    def _build_graph_metadata(self, bs: int, num_tokens: int, forward_mode: ForwardMode) -> ForwardMetadata:
        state = self.graph_state[forward_mode]
        q_len = 1 if forward_mode is ForwardMode.DECODE else num_tokens // bs
        metadata = ForwardMetadata(
            cache_seqlens=state.cache_seqlens[:bs],
            cu_seqlens_q=state.cu_seqlens_q[: bs + 1],
            cu_seqlens_k=state.cu_seqlens_k[: bs + 1],
            max_seq_len_q=q_len,
            max_seq_len_k=0,
            page_table=state.page_table[:bs],
            swa_page_table=None if state.swa_page_table is None else state.swa_page_table[:bs],
        )
        metadata.cu_seqlens_q.copy_(torch.arange(0, (bs + 1) * q_len, q_len, dtype=torch.int32))
        return metadata

    def _apply_graph_metadata(
        self, key: tuple[ForwardMode, int], req_pool_indices: torch.Tensor, seq_lens: torch.Tensor
    ) -> None:
        forward_mode, _ = key
        metadata = self.graph_metadata[key]
        seq_lens = seq_lens.to(device=self.device, dtype=torch.int32)
        if forward_mode is ForwardMode.DECODE:
            self._apply_decode(metadata, req_pool_indices, seq_lens)
        elif forward_mode is ForwardMode.TARGET_VERIFY:
            self._apply_target_verify(metadata, req_pool_indices, seq_lens)
        else:
            self._apply_draft_extend(metadata, req_pool_indices, seq_lens)
        kernel = self.graph_kernels[key]
        kernel.plan(metadata)
        self.forward_metadata, self.forward_kernel = metadata, kernel

    def _apply_decode(self, metadata: ForwardMetadata, req_pool_indices: torch.Tensor, seq_lens: torch.Tensor) -> None:
        metadata.cache_seqlens.copy_(seq_lens)
        metadata.cu_seqlens_k[1:].copy_(torch.cumsum(seq_lens, 0))
        metadata.max_seq_len_k = int(seq_lens.max())
        self._copy_page_table(metadata, req_pool_indices, metadata.max_seq_len_k)

    def _apply_target_verify(
        self, metadata: ForwardMetadata, req_pool_indices: torch.Tensor, seq_lens: torch.Tensor
    ) -> None:
        metadata.cache_seqlens.copy_(seq_lens + metadata.max_seq_len_q)
        metadata.cu_seqlens_k[1:].copy_(torch.cumsum(metadata.cache_seqlens, 0))
        metadata.max_seq_len_k = int(seq_lens.max()) + metadata.max_seq_len_q
        self._copy_page_table(metadata, req_pool_indices, metadata.max_seq_len_k)

    def _apply_draft_extend(
        self, metadata: ForwardMetadata, req_pool_indices: torch.Tensor, seq_lens: torch.Tensor
    ) -> None:
        metadata.cache_seqlens.copy_(seq_lens)
        metadata.cu_seqlens_k[1:].copy_(torch.cumsum(seq_lens, 0))
        metadata.max_seq_len_k = int(seq_lens.max())
        self._copy_page_table(metadata, req_pool_indices, metadata.max_seq_len_k)

    # ------------------------------------------------------------------ page tables

    def _copy_page_table(self, metadata: ForwardMetadata, req_pool_indices: torch.Tensor, num_tokens: int) -> None:
        """Rewrite the first pages of each row of the graph page table for ``num_tokens`` tokens."""
        num_pages = ceil_div(num_tokens, self.page_size)
        metadata.page_table[:, :num_pages].copy_(self._page_table_rows(req_pool_indices, num_pages))
        if metadata.swa_page_table is not None:
            self._translate_swa_page_table(metadata, metadata.max_seq_len_k)

    def _page_table_rows(self, req_pool_indices: torch.Tensor, num_pages: int) -> torch.Tensor:
        """``req_to_token[req, ::page_size] // page_size``: the page ids of each request's tokens."""
        rows = self.kv_pool.req_to_token[req_pool_indices.to(self.device).long()]
        return rows[:, : num_pages * self.page_size : self.page_size] // self.page_size

    def _translate_swa_page_table(self, metadata: ForwardMetadata, max_seq_len_k: int) -> None:
        """Map the full-attention page ids of the first pages to the SWA pool's page ids."""
        assert metadata.swa_page_table is not None
        num_pages = ceil_div(max_seq_len_k, self.page_size)
        full_pages = metadata.page_table[:, :num_pages].long()
        metadata.swa_page_table[:, :num_pages].copy_(self.kv_pool.full_to_swa_page[full_pages])

    # ------------------------------------------------------------------ forward

    def forward(self, q: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """Attention for the current metadata; reads and writes ``batch * max_seq_len_q`` rows."""
        if self.forward_kernel is None:
            raise RuntimeError("forward() called before the forward metadata was initialised")
        if out is None:
            out = torch.empty_like(q)
        self.forward_kernel.run(q, out)
        return out
