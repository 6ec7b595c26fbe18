"""Capture and replay of one forward mode per batch size, as SGLang's CUDA-graph runner does it.

On CUDA each batch size gets a ``torch.cuda.CUDAGraph``; whatever the kernel launch read at
capture (the query length per request among it) is baked in. On the CPU the same
capture/apply/replay sequence runs eagerly over the same fixed buffers.
"""

from __future__ import annotations

import torch

from .attention_backend import PagedAttentionBackend
from .forward_mode import ForwardMode

CAPTURE_SEQ_LEN = 1


class GraphRunner:
    """Graphs for ``forward_mode`` with ``tokens_per_req`` query tokens (T) per request."""

    def __init__(
        self,
        backend: PagedAttentionBackend,
        forward_mode: ForwardMode,
        batch_sizes: list[int],
        tokens_per_req: int = 1,
    ) -> None:
        self.backend = backend
        self.forward_mode = forward_mode
        self.tokens_per_req = 1 if forward_mode is ForwardMode.DECODE else tokens_per_req
        self.batch_sizes = sorted(set(batch_sizes))
        config = backend.config
        max_bs = self.batch_sizes[-1]
        # Room for N tokens per request (the configured draft length) as well as T.
        rows = max_bs * max(self.tokens_per_req, config.speculative_num_draft_tokens)
        shape = (rows, config.num_q_heads, config.head_dim)
        self.static_q = torch.zeros(shape, dtype=backend.kv_pool.dtype, device=backend.device)
        self.static_out = torch.zeros_like(self.static_q)
        self.graphs: dict[int, torch.cuda.CUDAGraph | None] = {}
        backend.init_cuda_graph_state(max_bs)

    @property
    def uses_cuda_graphs(self) -> bool:
        return self.backend.device.type == "cuda"

    def capture(self) -> None:
        for bs in self.batch_sizes:
            self.backend.init_forward_metadata_capture_cuda_graph(
                bs,
                bs * self.tokens_per_req,
                torch.arange(bs, dtype=torch.int32),
                torch.full((bs,), CAPTURE_SEQ_LEN, dtype=torch.int32),
                self.forward_mode,
            )
            self.graphs[bs] = self._capture_one() if self.uses_cuda_graphs else None

    def _capture_one(self) -> torch.cuda.CUDAGraph:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                self.backend.forward(self.static_q, self.static_out)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.backend.forward(self.static_q, self.static_out)
        return graph

    def replay(self, req_pool_indices: torch.Tensor, seq_lens: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """Run the captured graph of ``len(seq_lens)`` requests on ``q``; returns its rows."""
        bs = int(seq_lens.shape[0])
        if bs not in self.graphs:
            raise KeyError(f"no graph captured for batch size {bs}; captured: {self.batch_sizes}")
        rows = bs * self.tokens_per_req
        if q.shape[0] != rows:
            raise ValueError(f"q has {q.shape[0]} rows; {bs} requests x {self.tokens_per_req} tokens need {rows}")
        self.static_q[:rows].copy_(q)
        self.backend.init_forward_metadata_replay_cuda_graph(bs, req_pool_indices, seq_lens, self.forward_mode)
        graph = self.graphs[bs]
        if graph is None:
            self.backend.forward(self.static_q, self.static_out)
        else:
            graph.replay()
        return self.static_out[:rows].clone()
