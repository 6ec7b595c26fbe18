"""What a FlashInfer wrapper's buffers say one attention call reads.

A plan hands FlashInfer ``kv_indptr`` / ``kv_indices`` / ``last_page_len`` (and for prefill
``qo_indptr`` and a custom mask packed per request, little bit order); these turn them back into
each row's KV length and the token slots it reads, and lay out SGLang's verify mask.
"""

from __future__ import annotations

import torch

from probes.sglang.backends.base import AttentionRead


def layout(indptr: torch.Tensor, indices: torch.Tensor, last: torch.Tensor, page: int, rows: int) -> AttentionRead:
    """Per row: its KV length and the token slots read (``page`` tokens a page)."""
    problems = [] if int(indptr[0]) == 0 else ["kv_indptr does not start at 0"]
    if indptr.numel() < rows + 1:
        problems.append(f"kv_indptr covers {indptr.numel() - 1} rows of {rows}")
        rows = indptr.numel() - 1
    kv_lens, slots = [], []
    for b in range(rows):
        start, end = int(indptr[b]), int(indptr[b + 1])
        if end < start or end > indices.numel():
            problems.append("kv_indptr out of order or past kv_indices")
            end = max(start, min(end, indices.numel()))
        pages = indices[start:end].long()
        kv_len = max(0, (end - start - 1) * page + int(last[b])) if end > start else 0
        tokens = (pages[:, None] * page + torch.arange(page)[None, :]).reshape(-1)[:kv_len]
        kv_lens.append(kv_len)
        slots.append(tokens)
    return AttentionRead([], kv_lens, slots, problems=sorted(set(problems)))


def masked_rows(
    b: dict[str, torch.Tensor | None], q_lens: list[int], layout: AttentionRead, rows: int
) -> list[torch.Tensor] | str | None:
    """With a custom mask: per request, per query row, the slots the row sees (request-major);
    a mask whose packed size is not ``q_len x kv_len`` bits per request is a problem."""
    if b["mask"] is None or b["mask_indptr"] is None:
        return None
    indptr = b["mask_indptr"].long()
    if indptr.numel() < rows + 1 or len(layout.kv_lens) < rows:
        return "mask_indptr covers fewer requests than the batch"
    sizes = (indptr[1 : rows + 1] - indptr[:rows]).tolist()
    if sizes != [-(-q * kv // 8) for q, kv in zip(q_lens, layout.kv_lens)]:
        return "mask_indptr does not match q_len x kv_len"
    seen = []
    for r in range(rows):
        bits = unpacked(b["mask"][int(indptr[r]) : int(indptr[r + 1])], q_lens[r] * layout.kv_lens[r])
        seen += [layout.kv_slots[r][row] for row in bits.reshape(q_lens[r], layout.kv_lens[r])]
    return seen


def unpacked(packed: torch.Tensor, count: int) -> torch.Tensor:
    """The first ``count`` bits of one request's packed mask (little bit order), as bools."""
    bits = (packed.to(torch.int32)[:, None] >> torch.arange(8)[None, :]) & 1
    return bits.reshape(-1).bool()[:count]
