"""A small serving setup built from a revision's ``backend`` module: config, KV pool, requests."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch

from probes.api import ProbeContext
from probes.demo_backend.reference import reference_attention

NUM_Q_HEADS, NUM_KV_HEADS, HEAD_DIM = 8, 2, 128
MAX_CONTEXT_LEN = 1024
POOL_TOKENS = 16384
MAX_REQS = 64


@dataclass
class Scenario:
    bk: ModuleType
    ctx: ProbeContext
    config: Any
    pool: Any
    backend: Any
    generator: torch.Generator
    next_req: int = 1

    @property
    def dtype(self) -> torch.dtype:
        return getattr(torch, self.ctx.dtype)

    @property
    def reference_dtype(self) -> torch.dtype:
        """fp64 on the CPU, fp32 on the GPU."""
        return torch.float32 if self.ctx.is_cuda else torch.float64

    def admit(self, kv_lens: list[int]) -> torch.Tensor:
        """Allocate a fresh request per KV length (ids never reused) and return their pool indices."""
        ids = list(range(self.next_req, self.next_req + len(kv_lens)))
        self.next_req += len(kv_lens)
        for req, kv_len in zip(ids, kv_lens):
            self.pool.alloc(req, kv_len)
        return torch.tensor(ids, dtype=torch.int32)

    def retire(self, req_pool_indices: torch.Tensor) -> None:
        for req in req_pool_indices.tolist():
            self.pool.free(req)

    def random_q(self, rows: int) -> torch.Tensor:
        q = torch.randn(rows, NUM_Q_HEADS, HEAD_DIM, generator=self.generator)
        return q.to(dtype=self.dtype, device=self.ctx.device)

    def random_lengths(self, count: int, low: int, high: int) -> list[int]:
        return torch.randint(low, high + 1, (count,), generator=self.generator).tolist()

    def forward_batch(self, mode: Any, req_pool_indices: torch.Tensor, seq_lens: list[int], tokens_per_req: int) -> Any:
        return self.bk.ForwardBatch(mode, req_pool_indices, torch.tensor(seq_lens, dtype=torch.int32), tokens_per_req)

    def reference(
        self, req_pool_indices: torch.Tensor, kv_lens: list[int], q: torch.Tensor, q_len: int
    ) -> torch.Tensor:
        return reference_attention(
            self.pool.req_to_token,
            self.pool.k_cache,
            self.pool.v_cache,
            req_pool_indices.tolist(),
            kv_lens,
            q,
            q_len,
            self.reference_dtype,
        )


def make_scenario(
    bk: ModuleType,
    ctx: ProbeContext,
    *,
    page_size: int,
    draft_tokens: int = 4,
    sliding_window: int | None = None,
    kernel: str = "auto",
) -> Scenario:
    config = bk.BackendConfig(
        num_q_heads=NUM_Q_HEADS,
        num_kv_heads=NUM_KV_HEADS,
        head_dim=HEAD_DIM,
        page_size=page_size,
        max_context_len=MAX_CONTEXT_LEN,
        speculative_num_draft_tokens=draft_tokens,
        sliding_window=sliding_window,
        kernel=kernel,
    )
    pool = bk.PagedKVPool(
        config, POOL_TOKENS // page_size, MAX_REQS, dtype=getattr(torch, ctx.dtype), device=ctx.device, seed=ctx.seed
    )
    backend = bk.PagedAttentionBackend(config, pool)
    generator = torch.Generator().manual_seed(ctx.seed)
    return Scenario(bk, ctx, config, pool, backend, generator)


def expected_page_rows(pool: Any, req_pool_indices: torch.Tensor, kv_lens: list[int]) -> list[torch.Tensor]:
    """Closed form: for each request, the page id of every page its ``kv_len`` tokens occupy."""
    page = pool.page_size
    rows = []
    for req, kv_len in zip(req_pool_indices.tolist(), kv_lens):
        slots = pool.req_to_token[req, :kv_len:page].long().cpu()
        rows.append(slots // page)
    return rows


def window_page_rows(
    pool: Any, req_pool_indices: torch.Tensor, kv_lens: list[int], window: int
) -> tuple[list[int], list[torch.Tensor]]:
    """First window page and the expected SWA page ids from it to the last page, per request."""
    full_rows = expected_page_rows(pool, req_pool_indices, kv_lens)
    firsts = [max(0, kv_len - window) // pool.page_size for kv_len in kv_lens]
    mapping = pool.full_to_swa_page.cpu().long()
    return firsts, [mapping[row[first:]] for row, first in zip(full_rows, firsts)]
