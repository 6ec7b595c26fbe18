"""The metadata contract of one attention call, as differences from its closed form.

What the TRTLLM decode kernel reads for a batch (target verify: T query tokens per request):
``q_len_per_req`` = T, ``seq_lens`` = ``cache_seqlens`` = each request's KV length, and
``block_tables`` = the page table, of which only the pages a request's KV occupies are read.
``cu_seqlens_k`` must be the running sum of the KV lengths, and ``max_seq_len_k``, where a
revision keeps one, is an upper bound the copies are sized from. ``cu_seqlens_q`` is not read by
this call and is not compared.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from probes.demo_backend.checks import field_difference, page_table_difference
from probes.sglang.graph import MetadataView


@dataclass(frozen=True)
class Expected:
    q_len: int
    kv_lens: list[int]
    page_rows: list[torch.Tensor]
    """The page ids of every page each request's KV occupies."""


def differences(label: str, got: MetadataView, want: Expected) -> list[str]:
    """``"<label> <field> ..."`` for every field of ``got`` that breaks the contract; only the live
    rows (a padded graph batch has more) and the used page-table columns count."""
    rows = len(want.kv_lens)
    kv = torch.tensor(want.kv_lens, dtype=torch.long)
    found = [field_difference("max_seq_len_q", -1 if got.q_len is None else got.q_len, want.q_len)]
    found.append(_rows("cache_seqlens", got.cache_seqlens, kv, rows))
    if got.cu_seqlens_k is not None:
        expected_cu = torch.nn.functional.pad(torch.cumsum(kv, 0), (1, 0))
        found.append(_rows("cu_seqlens_k", got.cu_seqlens_k, expected_cu, rows + 1))
    if got.max_seq_len_k and got.max_seq_len_k < int(kv.max()):
        found.append(f"max_seq_len_k below the longest KV (by {int(kv.max()) - got.max_seq_len_k})")
    if got.page_table is None:
        found.append("page_table missing")
    else:
        found.append(page_table_difference("page_table", got.page_table[:rows], want.page_rows))
    return [f"{label} {d}" for d in found if d is not None]


def _rows(name: str, got: torch.Tensor | None, want: torch.Tensor, rows: int) -> str | None:
    if got is None:
        return f"{name} missing"
    if got.numel() < rows:
        return f"{name} has {got.numel()} entries for {rows}"
    return field_difference(name, got[:rows], want)


def kv_offset(got: MetadataView, seq_lens: list[int]) -> int | None:
    """The k with ``cache_seqlens == seq_lens + k`` for every live request, or None."""
    if got.cache_seqlens is None or got.cache_seqlens.numel() < len(seq_lens):
        return None
    delta = got.cache_seqlens[: len(seq_lens)].long() - torch.tensor(seq_lens, dtype=torch.long)
    return int(delta[0]) if bool((delta == delta[0]).all()) else None


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
