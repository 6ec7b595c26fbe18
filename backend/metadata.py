"""Per-forward attention metadata and the batch it is derived from."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .forward_mode import ForwardMode


@dataclass
class ForwardBatch:
    """The live requests of one forward pass, as the scheduler hands them to the backend."""

    forward_mode: ForwardMode
    req_pool_indices: torch.Tensor
    seq_lens: torch.Tensor
    tokens_per_req: int = 1

    @property
    def batch_size(self) -> int:
        return int(self.seq_lens.shape[0])

    @property
    def num_tokens(self) -> int:
        return self.batch_size * self.tokens_per_req


@dataclass
class ForwardMetadata:
    """What the kernel reads: the shape of the TRTLLM MHA backend's metadata.

    ``max_seq_len_q`` is a plain Python int (the kernel's ``q_len_per_req``): a CUDA graph bakes
    it in at capture. The tensors are views into fixed buffers on the graph path and fresh
    tensors on the eager path.
    """

    cache_seqlens: torch.Tensor
    cu_seqlens_q: torch.Tensor
    cu_seqlens_k: torch.Tensor
    max_seq_len_q: int
    max_seq_len_k: int
    page_table: torch.Tensor
    swa_page_table: torch.Tensor | None = None

    @property
    def batch_size(self) -> int:
        return int(self.cache_seqlens.shape[0])
