"""The kernel interface: FlashInfer's plan/run split."""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch

from ..metadata import ForwardMetadata


class AttentionKernel(ABC):
    """Paged attention over a ``PagedKVPool``.

    ``plan`` does the host-side work for one metadata state (it may synchronise and allocate, and
    is never called inside a CUDA-graph capture); ``run`` only launches, so it can be captured.
    ``run`` reads ``batch_size * max_seq_len_q`` rows of ``q`` and writes as many rows of ``out``,
    taking both numbers from the planned metadata: query rows are grouped by the metadata's query
    length, exactly as a CUDA graph replays them.
    """

    def __init__(self) -> None:
        self.metadata: ForwardMetadata | None = None

    def plan(self, metadata: ForwardMetadata) -> None:
        self.metadata = metadata

    def planned(self) -> ForwardMetadata:
        if self.metadata is None:
            raise RuntimeError(f"{type(self).__name__}.run() called before plan()")
        return self.metadata

    @abstractmethod
    def run(self, q: torch.Tensor, out: torch.Tensor) -> None:
        """Attention of ``q`` (``[rows, num_q_heads, head_dim]``) into ``out``."""
