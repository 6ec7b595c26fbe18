"""A revision's ``TRTLLMHAAttnBackend`` set up on the CPU, with a paged KV pool and batches.

The backend is made with ``__new__`` and given by hand the attributes its metadata paths read
(its ``__init__`` builds FlashInfer wrappers), as SGLang's own graph-metadata test does; the set
is the union over the revisions, and attributes a revision defines as read-only are left alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType, SimpleNamespace
from typing import Any

import torch

MAX_CONTEXT_LEN = 1024
POOL_TOKENS = 1 << 17
MAX_REQS = 64
SLACK_TOKENS = 16
"""Slots allocated past a request's KV length, so a routine that reads a few columns too far
reads real page ids (and a wrong length shows as a wrong length, not as an index error)."""


@dataclass
class Pool:
    """``req_to_token`` over pages handed out at random; request ids are never reused (0 is the
    padding request)."""

    page_size: int
    generator: torch.Generator
    req_to_token: torch.Tensor = field(init=False)
    free_pages: list[int] = field(init=False)
    next_req: int = 1

    def __post_init__(self) -> None:
        self.req_to_token = torch.zeros(MAX_REQS, MAX_CONTEXT_LEN, dtype=torch.int32)
        pages = POOL_TOKENS // self.page_size
        self.free_pages = (torch.randperm(pages - 1, generator=self.generator) + 1).tolist()

    def admit(self, kv_lens: list[int]) -> torch.Tensor:
        """A fresh request per KV length; returns their pool indices (int64)."""
        ids = list(range(self.next_req, self.next_req + len(kv_lens)))
        if ids[-1] >= MAX_REQS:
            raise RuntimeError("the probe's KV pool ran out of request slots")
        self.next_req += len(kv_lens)
        for req, kv_len in zip(ids, kv_lens):
            self._allocate(req, min(kv_len + SLACK_TOKENS, MAX_CONTEXT_LEN))
        return torch.tensor(ids, dtype=torch.int64)

    def _allocate(self, req: int, tokens: int) -> None:
        count = -(-tokens // self.page_size)
        pages = torch.tensor([self.free_pages.pop() for _ in range(count)], dtype=torch.int32)
        offsets = torch.arange(self.page_size, dtype=torch.int32)
        slots = (pages[:, None] * self.page_size + offsets[None, :]).flatten()[:tokens]
        self.req_to_token[req, :tokens] = slots

    def page_rows(self, req_pool_indices: torch.Tensor, kv_lens: list[int]) -> list[torch.Tensor]:
        """Closed form: the page id of every page each request's ``kv_len`` tokens occupy."""
        rows = self.req_to_token[req_pool_indices.long()]
        return [(row[: kv_len : self.page_size].long() // self.page_size) for row, kv_len in zip(rows, kv_lens)]

    def slots(self, req_pool_indices: torch.Tensor, starts: list[int], count: int) -> torch.Tensor:
        """The KV slots of positions ``start .. start + count - 1`` of each request (int64)."""
        rows = self.req_to_token[req_pool_indices.long()]
        return torch.cat([row[start : start + count].long() for row, start in zip(rows, starts)])


def swa_mapping(page_size: int, generator: torch.Generator) -> torch.Tensor:
    """A full->SWA slot mapping that moves whole pages, with SGLang's trailing ``-1`` sentinel."""
    pages = POOL_TOKENS // page_size
    order = torch.randperm(pages, generator=generator)
    slots = torch.arange(POOL_TOKENS)
    mapping = order[slots // page_size] * page_size + slots % page_size
    return torch.cat([mapping, torch.tensor([-1])]).to(torch.int64)


@dataclass
class VerifyInput:
    """The spec-info of a target-verify batch (topk = 1, no ragged layout)."""

    num_tokens_per_req: int
    ragged_verify_layout: Any = None
    topk: int = 1
    custom_mask: Any = None

    @property
    def draft_token_num(self) -> int:
        return self.num_tokens_per_req

    def is_draft_input(self) -> bool:
        return False

    def is_verify_input(self) -> bool:
        return True


def make_swa_pool(module: ModuleType, mapping: torch.Tensor) -> Any:
    """The revision's ``SWAKVPool``, made with ``__new__``, translating through ``mapping``."""
    pool_class = module.SWAKVPool
    pool = pool_class.__new__(pool_class)
    attributes: dict[str, Any] = {
        "full_to_swa_index_mapping": mapping,
        "_cached_loc_key": None,
        "_cached_swa_loc": None,
        "layers_mapping": {},
    }
    for name, value in attributes.items():
        _set(pool, name, value)
    return pool


def make_backend(
    module: ModuleType,
    pool: Pool,
    *,
    draft_tokens: int,
    max_bs: int,
    max_tokens_per_req: int,
    swa: Any = None,
) -> Any:
    """The revision's backend with CUDA-graph state for up to ``max_bs`` requests."""
    backend_class = module.TRTLLMHAAttnBackend
    backend = backend_class.__new__(backend_class)
    mapping = None if swa is None else swa.full_to_swa_index_mapping
    attributes: dict[str, Any] = {
        "device": torch.device("cpu"),
        "max_context_len": MAX_CONTEXT_LEN,
        "page_size": pool.page_size,
        "max_num_pages": -(-MAX_CONTEXT_LEN // pool.page_size),
        "req_to_token": pool.req_to_token,
        "req_to_token_pool": SimpleNamespace(req_to_token=pool.req_to_token),
        "speculative_step_id": 0,
        "speculative_num_steps": 1,
        "speculative_num_draft_tokens": draft_tokens,
        "topk": 1,
        "decode_cuda_graph_metadata": {},
        "target_verify_metadata": {},
        "draft_extend_metadata": {},
        "forward_metadata": None,
        "_swa_kv_pool": swa,
        "use_sliding_window_kv_pool": swa is not None,
        "_swa_full_to_swa_mapping": mapping,
        "token_to_kv_pool": swa,
        "is_xqa_impl": True,
        "data_type": torch.bfloat16,
        "q_data_type": torch.bfloat16,
        "kv_cache_dtype": torch.bfloat16,
        "workspace_buffer": None,
    }
    for name, value in attributes.items():
        _set(backend, name, value)
    backend.init_cuda_graph_state(max_bs, max_bs * max_tokens_per_req)
    return backend


def _set(target: Any, name: str, value: Any) -> None:
    """Set ``name`` unless the class makes it read-only (a property without a setter)."""
    declared = getattr(type(target), name, None)
    if isinstance(declared, property) and declared.fset is None:
        return
    setattr(target, name, value)


@dataclass
class Batch:
    """Live requests of one forward step: what the scheduler hands the graph runner."""

    req_pool_indices: torch.Tensor
    seq_lens: list[int]
    kv_lens: list[int]
    """KV lengths the attention reads: decode counts its token in ``seq_lens`` already, target
    verify adds its T draft tokens."""
    tokens_per_req: int
    out_cache_loc: torch.Tensor
    host_lag: int = 0
    """How far the host copy of ``seq_lens`` trails the device one (overlap scheduling)."""

    @property
    def size(self) -> int:
        return len(self.seq_lens)

    def device_seq_lens(self) -> torch.Tensor:
        return torch.tensor(self.seq_lens, dtype=torch.int32)

    def host_seq_lens(self) -> torch.Tensor:
        return torch.tensor([max(1, s - self.host_lag) for s in self.seq_lens], dtype=torch.int32)


def admit_verify(pool: Pool, prefixes: list[int], tokens_per_req: int) -> Batch:
    """Target-verify requests: ``seq_lens`` are the prefixes, the T draft tokens follow them."""
    kv_lens = [s + tokens_per_req for s in prefixes]
    req = pool.admit(kv_lens)
    return Batch(req, list(prefixes), kv_lens, tokens_per_req, pool.slots(req, prefixes, tokens_per_req))


def admit_decode(pool: Pool, seq_lens: list[int], host_lag: int = 0) -> Batch:
    """Decode requests: ``seq_lens`` count the token being decoded, written at the last position."""
    req = pool.admit(seq_lens)
    out = pool.slots(req, [s - 1 for s in seq_lens], 1)
    return Batch(req, list(seq_lens), list(seq_lens), 1, out, host_lag)


def eager_batch(batch: Batch, forward_mode: Any, spec_info: Any, backend: Any) -> SimpleNamespace:
    """The ForwardBatch fields the backend's eager metadata path reads, for ``batch`` (older
    revisions reach the pools through the batch)."""
    tokens = batch.size * batch.tokens_per_req
    seq_lens = batch.device_seq_lens()
    return SimpleNamespace(
        batch_size=batch.size,
        forward_mode=forward_mode,
        input_ids=torch.zeros(tokens, dtype=torch.int64),
        positions=torch.zeros(tokens, dtype=torch.int64),
        req_pool_indices=batch.req_pool_indices.clone(),
        seq_lens=seq_lens,
        seq_lens_cpu=batch.host_seq_lens(),
        seq_lens_sum=int(seq_lens.sum()),
        out_cache_loc=batch.out_cache_loc.clone(),
        encoder_lens=None,
        spec_info=spec_info,
        extend_seq_lens=None,
        extend_seq_lens_cpu=None,
        extend_prefix_lens=None,
        extend_prefix_lens_cpu=None,
        req_to_token_pool=backend.req_to_token_pool,
        token_to_kv_pool=backend.token_to_kv_pool,
    )


def crossing_prefixes(
    page_size: int, low: int, high: int, count: int, generator: torch.Generator, limit: int = 600
) -> list[int]:
    """Distinct prefixes s with ``s + low`` ending a page exactly, so ``s + high`` (high > low)
    needs one page more: a routine that takes the wrong one of the two lengths copies a wrong
    number of pages."""
    first = -(-(1 + low) // page_size)
    last = limit // page_size
    picks = torch.randperm(last - first + 1, generator=generator)[:count] + first
    return [int(k) * page_size - low for k in picks]


def page_start_lengths(page_size: int, count: int, generator: torch.Generator, limit: int = 600) -> list[int]:
    """Distinct lengths one past a page boundary: the last token opens a new page."""
    picks = torch.randperm(limit // page_size - 1, generator=generator)[:count] + 1
    return [int(k) * page_size + 1 for k in picks]
