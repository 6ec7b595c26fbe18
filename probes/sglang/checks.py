"""The metadata contract of one attention call, as differences from its closed form.

Whatever the backend, a call reads for each live request a query length, a KV length and the KV
slots of those tokens in order (``probes.sglang.backends.base.AttentionRead``); the closed form
of a batch says what each must be. A padded graph batch has more rows: only the live ones count.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from probes.demo_backend.checks import field_difference, page_table_difference
from probes.sglang.backends.base import AttentionRead
from probes.sglang.fixture import Batch, Pool


@dataclass(frozen=True)
class Expected:
    """The closed form of a batch, per live request."""

    q_lens: list[int]
    kv_lens: list[int]
    kv_slots: list[torch.Tensor]
    rows: list[torch.Tensor] | None = None
    """Where a request's query rows read different KV (``Batch.row_positions``): the slots each
    row reads, request-major; then the rows are what is compared."""
    rows_in_place: list[torch.Tensor] | None = None
    """``rows`` as they may equally be read (``Batch.row_positions_in_place``)."""

    @classmethod
    def of(cls, pool: Pool, batch: Batch) -> Expected:
        table = pool.req_to_token[batch.req_pool_indices.long()]
        slots = [row[:kv].long() for row, kv in zip(table, batch.kv_lens)]

        def slots_of(positions: list[list[torch.Tensor]] | None) -> list[torch.Tensor] | None:
            if positions is None:
                return None
            return [table[b, p].long() for b, request in enumerate(positions) for p in request]

        rows, in_place = slots_of(batch.row_positions), slots_of(batch.row_positions_in_place)
        return cls([batch.tokens_per_req] * batch.size, list(batch.kv_lens), slots, rows, in_place)


def differences(label: str, got: AttentionRead, want: Expected) -> list[str]:
    """``"<label> <what> ..."`` for every way ``got`` breaks the closed form ``want``."""
    if want.rows is not None:
        found = _row_difference(got.rows, want.rows, want.rows_in_place or want.rows)
        return [f"{label} {d}" for d in [*got.problems, found] if d]
    rows = len(want.kv_lens)
    found: list[str | None] = list(got.problems)
    if len(got.q_lens) < rows or len(got.kv_lens) < rows or len(got.kv_slots) < rows:
        return [f"{label} {p}" for p in [*got.problems, f"reads {len(got.kv_lens)} requests for {rows}"]]
    found.append(field_difference("q_len", torch.tensor(got.q_lens[:rows]), torch.tensor(want.q_lens)))
    found.append(field_difference("kv_len", torch.tensor(got.kv_lens[:rows]), torch.tensor(want.kv_lens)))
    wrong = sum(not torch.equal(g.long(), w) for g, w in zip(got.kv_slots[:rows], want.kv_slots))
    if wrong and not found[-1]:
        found.append("kv_slots wrong")
    return [f"{label} {d}" for d in found if d]


def _row_difference(got: list[torch.Tensor] | None, want: list[torch.Tensor], alike: list[torch.Tensor]) -> str | None:
    """How the rows read differ from ``want`` (each row may equally read as ``alike``'s)."""
    if got is None:
        return "query rows unread"
    if len(got) < len(want):
        return f"reads {len(got)} query rows for {len(want)}"
    lengths = [g.numel() for g in got[: len(want)]]
    wrong_length = field_difference("row kv_len", torch.tensor(lengths), torch.tensor([w.numel() for w in want]))
    if wrong_length:
        return wrong_length
    same = [torch.equal(g.long(), w) or torch.equal(g.long(), a) for g, w, a in zip(got, want, alike)]
    return None if all(same) else "kv_slots wrong in query rows"


def window_differences(
    label: str, table: torch.Tensor | None, firsts: list[int], rows: list[torch.Tensor]
) -> list[str]:
    """Sliding-window page table: row b, from its first window page on, against ``rows[b]``."""
    if table is None:
        return [f"{label} swa_page_table missing"]
    table = table.cpu().long()
    shifted = torch.zeros(len(rows), table.shape[1], dtype=torch.long)
    for b, first in enumerate(firsts):
        shifted[b, : table.shape[1] - first] = table[b, first:]
    found = page_table_difference("swa_page_table", shifted, rows)
    return [] if found is None else [f"{label} {found}"]


def join(problems: list[str]) -> str | None:
    """One stable signature: the distinct problems in order of first appearance."""
    distinct = list(dict.fromkeys(problems))
    return ", ".join(distinct) if distinct else None
