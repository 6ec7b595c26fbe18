"""What FlashAttention's (FA3) attention calls read, from the metadata records they are handed.

A call (``flash_attn_with_kvcache``) reads ``cu_seqlens_q`` (each request's query rows),
``max_seq_len_q`` (a Python int a graph bakes in: the kernel computes no more query rows than
it), ``cache_seqlens_int32`` (each request's KV length) and ``page_table`` (token j of a request
is slot ``page_table[b, j // p] * p + j % p``). ``cu_seqlens_k`` travels as ``cu_seqlens_k_new``,
which the call only reads with new keys to append: it is not judged.

With topk > 1 a draft decode or target verify is a cascade of two calls whose outputs are merged
by their log-sum-exps: the prefix call (each request's query rows, non-causal, over the shared
prefix) and the expand call (one query row each, over that row's own draft tokens). A query row
reads the prefix call's slots of its request, then the expand call's slots of its row; within
each call the slots come in the order the row's page table lists them, which is the closed form's
order (draft decode: the copied partial page, then the branch's drafts; target verify: the
masked draft tokens in tree order), so the sequences are compared as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from probes.sglang.backends.base import AttentionRead
from probes.sglang.backends.trtllm_mha import pages_to_slots

METADATA_BUFFERS = ("cache_seqlens_int32", "cu_seqlens_q", "page_table")
"""The metadata tensors the attention call reads (a graph keeps them by reference)."""


@dataclass(frozen=True)
class FlashCall:
    """What one attention call was handed: the buffers (by reference) and ``max_seq_len_q``."""

    q_limit: int | None
    buffers: dict[str, torch.Tensor | None]

    @classmethod
    def of(cls, metadata: Any) -> FlashCall:
        limit = getattr(metadata, "max_seq_len_q", None)
        return cls(
            int(limit) if isinstance(limit, int) else None,
            {name: getattr(metadata, name, None) for name in METADATA_BUFFERS},
        )


@dataclass(frozen=True)
class FlashCalls:
    """The calls of one attention layer: one, or a cascade's prefix and expand calls."""

    prefix: FlashCall
    expand: FlashCall | None = None
    expand_page_size: int = 1
    """The page size the expand call sees the KV cache with (target verify views it token by token)."""


@dataclass
class CallRead:
    """What one call reads for its first requests."""

    q_starts: list[int]
    """Each request's first query row, counted over the whole batch."""
    q_lens: list[int]
    """Query rows the kernel computes for each request (at most ``max_seq_len_q``)."""
    kv_lens: list[int]
    slots: list[torch.Tensor]
    problems: list[str]


def read_call(call: FlashCall, requests: int, page_size: int, width: int) -> CallRead:
    """What ``call`` reads for its first ``requests`` requests, through pages of ``page_size``."""
    cache_seqlens, cu_seqlens_q, page_table = (call.buffers[name] for name in METADATA_BUFFERS)
    if cache_seqlens is None or page_table is None or cu_seqlens_q is None:
        return CallRead([], [], [], [], ["cache_seqlens_int32, cu_seqlens_q or page_table missing"])
    problems = []
    bounds = cu_seqlens_q[: requests + 1].long()
    rows_q = torch.diff(bounds).tolist()
    if len(rows_q) < requests:
        problems.append(f"cu_seqlens_q bounds {len(rows_q)} requests of {requests}")
    limit = call.q_limit if call.q_limit is not None else max(rows_q, default=0)
    if rows_q and limit < max(rows_q):
        problems.append(f"max_seq_len_q {limit} below a request's {max(rows_q)} query rows")
    q_lens = [min(int(q), limit) for q in rows_q]
    kv_lens = [int(n) for n in cache_seqlens[:requests].tolist()]
    slots = [pages_to_slots(page_table[b], kv, page_size, width) for b, kv in enumerate(kv_lens)]
    return CallRead([int(s) for s in bounds[:-1].tolist()], q_lens, kv_lens, slots, problems)


def read_calls(calls: FlashCalls, requests: int, page_size: int, width: int) -> AttentionRead:
    """What the layer reads for its first ``requests`` requests: per request, and with a cascade
    per query row."""
    prefix = read_call(calls.prefix, requests, page_size, width)
    read = AttentionRead(prefix.q_lens, prefix.kv_lens, prefix.slots, problems=prefix.problems)
    if calls.expand is None:
        return read
    queries = sum(torch.diff(calls.prefix.buffers["cu_seqlens_q"][: requests + 1].long()).tolist())
    expand = read_call(calls.expand, queries, calls.expand_page_size, width)
    read.problems += [f"expand {p}" for p in expand.problems]
    read.rows = _cascade_rows(prefix, expand, read.problems)
    return read


def _cascade_rows(prefix: CallRead, expand: CallRead, problems: list[str]) -> list[torch.Tensor]:
    """Each computed query row's slots: its request's prefix slots, then its expand row's."""
    owner = {start + i: row for row, (start, q) in enumerate(zip(expand.q_starts, expand.q_lens)) for i in range(q)}
    rows, orphans = [], 0
    for b, (start, q) in enumerate(zip(prefix.q_starts, prefix.q_lens)):
        for query in range(start, start + q):
            row = owner.get(query)
            orphans += row is None
            rows.append(prefix.slots[b] if row is None else torch.cat([prefix.slots[b], expand.slots[row]]))
    if orphans:
        problems.append(f"expand call computes no row for {orphans} query rows")
    return rows
