"""Static configuration of one attention backend instance."""

from __future__ import annotations

from dataclasses import dataclass

KERNELS = ("auto", "torch", "xqa", "fa2", "fa3")


@dataclass(frozen=True)
class BackendConfig:
    """Model shape and serving settings the backend is built with.

    ``speculative_num_draft_tokens`` is the server's configured draft length N. A speculative
    algorithm may verify a different number of tokens per request (T); the backend must take T
    from the batch it is given, never from N.
    """

    num_q_heads: int = 8
    num_kv_heads: int = 2
    head_dim: int = 64
    page_size: int = 16
    max_context_len: int = 1024
    speculative_num_draft_tokens: int = 4
    sliding_window: int | None = None
    kernel: str = "auto"

    def __post_init__(self) -> None:
        if self.num_q_heads % self.num_kv_heads:
            raise ValueError(f"num_q_heads {self.num_q_heads} is not a multiple of num_kv_heads {self.num_kv_heads}")
        if self.page_size < 1 or self.max_context_len % self.page_size:
            raise ValueError(
                f"page_size {self.page_size} must be >= 1 and divide max_context_len {self.max_context_len}"
            )
        if self.kernel not in KERNELS:
            raise ValueError(f"unknown kernel {self.kernel!r}; choose one of {', '.join(KERNELS)}")
        if self.sliding_window is not None and self.sliding_window < 1:
            raise ValueError("sliding_window must be a positive number of tokens or None")

    @property
    def max_pages_per_req(self) -> int:
        return self.max_context_len // self.page_size


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)
