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
    """The spec-info of a target-verify batch (no ragged layout): a chain of draft tokens (topk 1)
    or, with ``tree``, a draft tree whose custom mask :meth:`bind` lays out for each batch."""

    num_tokens_per_req: int
    ragged_verify_layout: Any = None
    topk: int = 1
    custom_mask: Any = None
    tree: torch.Tensor | None = None
    """[N, N] bool: draft token i sees draft token j (its ancestors and itself)."""

    def bind(self, seq_lens: list[int]) -> None:
        """SGLang's flat verify mask for requests of ``seq_lens``: per request, N rows of
        ``seq_len + N`` bools, the prefix all visible, then the tree's row."""
        if self.tree is not None:
            self.custom_mask = verify_mask(self.tree, seq_lens)


def verify_mask(tree: torch.Tensor, seq_lens: list[int]) -> torch.Tensor:
    """SGLang's flat target-verify mask: per request, a row per draft token over ``seq_len + N``
    columns, the prefix all visible, then the draft ``tree``'s row ([N, N] bool)."""
    n = tree.shape[0]
    rows = [torch.cat([torch.ones(n, s, dtype=torch.bool), tree.bool()], 1).flatten() for s in seq_lens]
    return torch.cat(rows) if rows else torch.zeros(0, dtype=torch.bool)

    @property
    def draft_token_num(self) -> int:
        return self.num_tokens_per_req

    def is_draft_input(self) -> bool:
        return False

    def is_verify_input(self) -> bool:
        return True


@dataclass
class DraftInput:
    """The spec-info of a draft batch: draft decode (one token a step per branch) or draft extend
    (``num_tokens_per_req`` tokens per request)."""

    topk: int = 1
    num_tokens_per_req: int = 1
    ragged_verify_layout: Any = None
    custom_mask: Any = None

    def is_draft_input(self) -> bool:
        return True

    def is_verify_input(self) -> bool:
        return False


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
    step: int = 0,
) -> Any:
    """The revision's backend with CUDA-graph state for up to ``max_bs`` requests; ``step`` is the
    speculative step a draft-decode sub-backend serves."""
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
        "speculative_step_id": step,
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
    row_positions: list[list[torch.Tensor]] | None = None
    """Where a request's query rows read different KV (topk > 1: a draft branch each, or a draft
    tree token each): per request, per row, the ``req_to_token`` positions it reads, in order."""
    row_positions_in_place: list[list[torch.Tensor]] | None = None
    """``row_positions`` as a backend may equally read them: a draft branch's copy of the prefix's
    partial page read in place (``branch_rows``)."""
    host_copy: bool = True
    """Whether the runner hands the backend a host copy of ``seq_lens``: SGLang's does not
    (``seq_lens_cpu`` and ``seq_lens_sum`` are None) to a backend that declares it does not read
    one (``needs_cpu_seq_lens = False``), as under overlap scheduling the copy would trail."""

    @property
    def size(self) -> int:
        return len(self.seq_lens)

    def device_seq_lens(self) -> torch.Tensor:
        return torch.tensor(self.seq_lens, dtype=torch.int32)

    def host_seq_lens(self) -> torch.Tensor | None:
        return torch.tensor(self.seq_lens, dtype=torch.int32) if self.host_copy else None


def admit_verify(pool: Pool, prefixes: list[int], tokens_per_req: int) -> Batch:
    """Target-verify requests: ``seq_lens`` are the prefixes, the T draft tokens follow them."""
    kv_lens = [s + tokens_per_req for s in prefixes]
    req = pool.admit(kv_lens)
    return Batch(req, list(prefixes), kv_lens, tokens_per_req, pool.slots(req, prefixes, tokens_per_req))


def admit_decode(pool: Pool, seq_lens: list[int], host_copy: bool = True) -> Batch:
    """Decode requests: ``seq_lens`` count the token being decoded, written at the last position."""
    req = pool.admit(seq_lens)
    out = pool.slots(req, [s - 1 for s in seq_lens], 1)
    return Batch(req, list(seq_lens), list(seq_lens), 1, out, host_copy=host_copy)


def admit_draft_decode(pool: Pool, prefixes: list[int], step: int) -> Batch:
    """Draft-decode requests at speculative step ``step`` (topk 1): ``seq_lens`` are the verified
    prefixes; the step's token is written at position ``prefix + step`` and attends to
    ``prefix + step + 1``."""
    kv_lens = [s + step + 1 for s in prefixes]
    req = pool.admit(kv_lens)
    return Batch(req, list(prefixes), kv_lens, 1, pool.slots(req, [s + step for s in prefixes], 1))


def branch_positions(prefix: int, branch: int, steps: int, page_size: int) -> torch.Tensor:
    """The ``req_to_token`` positions of draft branch ``branch``'s ``steps`` tokens, as SGLang
    lays out topk > 1 drafts: each branch on pages of its own after the prefix's full pages,
    starting with a copy of the prefix's partial last page (page size 1: ``prefix + branch *
    steps + e``)."""
    partial = prefix % page_size
    pages = -(-(partial + steps) // page_size)
    start = prefix - partial + branch * pages * page_size
    return torch.arange(start + partial, start + partial + steps)


def branch_rows(
    prefix: int, topk: int, num_steps: int, step: int, page_size: int, in_place: bool = False
) -> list[torch.Tensor]:
    """Each branch's KV positions at speculative ``step``: the prefix's full pages, then its own
    page(s): the copied partial page and its first ``step + 1`` draft tokens. The copy holds the
    same K/V as the prefix's partial page, so a token-granular backend may read that in place:
    ``in_place`` gives those rows."""
    full = prefix - prefix % page_size
    rows = []
    for branch in range(topk):
        drafts = branch_positions(prefix, branch, num_steps, page_size)[: step + 1]
        copied = (
            torch.arange(full, prefix)
            if in_place
            else torch.arange(int(drafts[0]) - prefix % page_size, int(drafts[0]))
        )
        rows.append(torch.cat([torch.arange(full), copied, drafts]))
    return rows


def admit_draft_tree(pool: Pool, prefixes: list[int], topk: int, num_steps: int, step: int) -> Batch:
    """Draft-decode requests at ``step`` with ``topk`` > 1 branches: every branch's ``num_steps``
    tokens are allocated (``out_cache_loc`` holds them request-, then branch-major), each branch's
    query row reads its own positions (``row_positions``)."""
    page = pool.page_size
    ends = [int(branch_positions(s, topk - 1, num_steps, page)[-1]) + 1 for s in prefixes]
    req = pool.admit(ends)
    rows = [branch_rows(s, topk, num_steps, step, page) for s in prefixes]
    in_place = [branch_rows(s, topk, num_steps, step, page, in_place=True) for s in prefixes]
    table = pool.req_to_token[req.long()]
    drafts = [
        table[b, branch_positions(s, t, num_steps, page)].long() for b, s in enumerate(prefixes) for t in range(topk)
    ]
    kv_lens = [s + step + 1 for s in prefixes]
    batch = Batch(req, list(prefixes), kv_lens, topk * num_steps, torch.cat(drafts), row_positions=rows)
    batch.row_positions_in_place = in_place
    return batch


def draft_tree(tokens: int, generator: torch.Generator) -> torch.Tensor:
    """A random draft tree over ``tokens`` tokens (token 0 the root, each later token's parent an
    earlier one): [tokens, tokens] bool, token i seeing its ancestors and itself."""
    seen = torch.eye(tokens, dtype=torch.bool)
    for i in range(1, tokens):
        parent = int(torch.randint(0, i, (1,), generator=generator))
        seen[i] |= seen[parent]
    return seen


def admit_verify_tree(pool: Pool, prefixes: list[int], tree: torch.Tensor) -> Batch:
    """Target-verify requests of a draft tree: N = ``len(tree)`` tokens after each prefix; query
    row i reads the prefix and the draft tokens ``tree[i]`` marks."""
    n = tree.shape[0]
    batch = admit_verify(pool, prefixes, n)
    batch.row_positions = [
        [torch.cat([torch.arange(s), s + tree[i].nonzero().flatten()]) for i in range(n)] for s in prefixes
    ]
    return batch


def admit_draft_extend(pool: Pool, seq_lens: list[int], tokens_per_req: int) -> Batch:
    """Draft-extend requests: ``seq_lens`` count the ``tokens_per_req`` tokens being extended, the
    last positions of each request."""
    req = pool.admit(seq_lens)
    starts = [s - tokens_per_req for s in seq_lens]
    return Batch(req, list(seq_lens), list(seq_lens), tokens_per_req, pool.slots(req, starts, tokens_per_req))


def eager_batch(batch: Batch, forward_mode: Any, spec_info: Any, backend: Any, extend: bool = False) -> SimpleNamespace:
    """The ForwardBatch fields the backend's eager metadata path reads, for ``batch`` (older
    revisions reach the pools through the batch); with ``extend``, an extend batch's lengths:
    each request extends its last ``tokens_per_req`` tokens."""
    tokens = batch.size * batch.tokens_per_req
    seq_lens = batch.device_seq_lens()
    extended = [batch.tokens_per_req] * batch.size if extend else None
    prefixes = [s - batch.tokens_per_req for s in batch.seq_lens] if extend else None
    return SimpleNamespace(
        batch_size=batch.size,
        forward_mode=forward_mode,
        input_ids=torch.zeros(tokens, dtype=torch.int64),
        positions=torch.zeros(tokens, dtype=torch.int64),
        req_pool_indices=batch.req_pool_indices.clone(),
        seq_lens=seq_lens,
        seq_lens_cpu=batch.host_seq_lens(),
        seq_lens_sum=int(seq_lens.sum()) if batch.host_copy else None,
        out_cache_loc=batch.out_cache_loc.clone(),
        encoder_lens=None,
        spec_info=spec_info,
        extend_seq_lens=None if extended is None else torch.tensor(extended, dtype=torch.int32),
        extend_seq_lens_cpu=extended,
        extend_prefix_lens=None if prefixes is None else torch.tensor(prefixes, dtype=torch.int32),
        extend_prefix_lens_cpu=prefixes,
        extend_num_tokens=tokens if extend else None,
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
