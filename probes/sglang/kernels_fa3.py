"""CPU versions of the metadata kernels SGLang's FlashAttention (FA3) backend launches.

``normal_decode_set_metadata`` (decode and topk-1 draft decode) became a fused triton launch in
the backend's later eras; ``draft_extend_set_metadata`` (draft extend v2, recorded inside the
graph) is one from the start; ``draft_decode_set_expand_metadata`` is torch under
``torch.compile``. Written from the kernels' semantics, in torch, without host syncs, so they run
eagerly and inside the CPU graph emulation; every entry a kernel does not write is left as it was.
Where a revision's launcher is plain torch it is kept: it is the code under test, and runs here.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch

FUSED_DECODE_MARKERS = ("_fused_metadata_kernel_general", "_fused_metadata_kernel_ps1_no_swa")
"""Module names that tell a triton ``normal_decode_set_metadata`` from the earlier torch one."""


def _page_heads(req_to_token: torch.Tensor, req_pool_indices: torch.Tensor, pages: int, page_size: int) -> torch.Tensor:
    """``req_to_token[req, p * page_size]`` for p < pages, by pointer arithmetic on the row
    stride as the kernels read it (a column past a row's end reads the next row)."""
    flat = req_to_token.reshape(-1)
    start = req_pool_indices.long()[:, None] * req_to_token.stride(0)
    offsets = torch.arange(pages, device=req_to_token.device)[None, :] * page_size * req_to_token.stride(1)
    return flat[(start + offsets).clamp(max=flat.numel() - 1)]


def _prefix_sums(values: torch.Tensor, out: torch.Tensor) -> None:
    """``out[0] = 0`` and ``out[1 : n + 1]`` the running sum of ``values`` (n of them)."""
    count = values.shape[0]
    out[:1].zero_()
    out[1 : count + 1].copy_(torch.cumsum(values.to(torch.int32), 0).to(out.dtype))


def normal_decode_set_metadata(
    cache_seqlens_int32: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    page_table: torch.Tensor,
    req_to_token: torch.Tensor,
    req_pool_indices: torch.Tensor,
    strided_indices: torch.Tensor,
    max_seq_pages: int,
    seq_lens: torch.Tensor,
    seq_len_delta: int,
    page_size: int,
    swa_page_table: torch.Tensor | None = None,
    token_to_kv_pool: Any = None,
) -> None:
    """The fused decode kernel: for B = ``cache_seqlens_int32.shape[0]`` rows,
    ``cache_seqlens = seq_lens + delta``, ``cu_seqlens_k = [0, cumsum]``, and the first
    ``max_seq_pages`` page-table columns of every row (no per-row bound), with the SWA page table
    through the pool's full-to-SWA mapping where both are given."""
    if page_size <= 0 or page_size & (page_size - 1):
        raise AssertionError(f"page_size must be a power of two, got {page_size}")
    rows = cache_seqlens_int32.shape[0]
    lengths = (seq_lens[:rows] + seq_len_delta).to(torch.int32)
    cache_seqlens_int32.copy_(lengths.to(cache_seqlens_int32.dtype))
    _prefix_sums(lengths, cu_seqlens_k)
    pages = int(max_seq_pages)
    if pages == 0:
        return
    heads = _page_heads(req_to_token, req_pool_indices[:rows], pages, page_size)
    page_table[:rows, :pages].copy_(torch.div(heads, page_size, rounding_mode="floor").to(page_table.dtype))
    if swa_page_table is not None and token_to_kv_pool is not None:
        mapping = token_to_kv_pool.full_to_swa_index_mapping
        swa = mapping[heads.long().clamp(0, mapping.numel() - 1)]
        swa_page_table[:rows, :pages].copy_(torch.div(swa, page_size, rounding_mode="floor").to(swa_page_table.dtype))


def draft_extend_set_metadata(
    cache_seqlens_int32: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    page_table: torch.Tensor,
    req_to_token: torch.Tensor,
    req_pool_indices: torch.Tensor,
    seq_lens: torch.Tensor,
    extend_seq_lens: torch.Tensor,
    page_size: int,
    full_to_swa_index_mapping: torch.Tensor | None = None,
    swa_page_table: torch.Tensor | None = None,
    out_cache_loc: torch.Tensor | None = None,
    swa_out_cache_loc: torch.Tensor | None = None,
) -> None:
    """The fused draft-extend-v2 kernel: ``cache_seqlens = seq_lens``, ``cu_seqlens_k`` and
    ``cu_seqlens_q`` (of ``extend_seq_lens``) as ``[0, cumsum]``, page-table columns below
    ``ceil(seq_len / page_size)`` of each row (the rest left alone), and with a SWA mapping the SWA
    page table likewise and every write location translated."""
    if page_size <= 0 or page_size & (page_size - 1):
        raise AssertionError(f"page_size must be a power of two, got {page_size}")
    rows = cache_seqlens_int32.shape[0]
    lengths = seq_lens[:rows].to(torch.int32)
    cache_seqlens_int32.copy_(lengths)
    _prefix_sums(lengths, cu_seqlens_k)
    _prefix_sums(extend_seq_lens[:rows], cu_seqlens_q)
    pages_needed = torch.div(lengths.long() + page_size - 1, page_size, rounding_mode="floor")
    width = page_table.shape[1]
    used = torch.arange(width, device=page_table.device)[None, :] < pages_needed.clamp(max=width)[:, None]
    heads = _page_heads(req_to_token, req_pool_indices[:rows], width, page_size)
    pages = torch.div(heads, page_size, rounding_mode="floor")
    page_table[:rows].copy_(torch.where(used, pages.to(page_table.dtype), page_table[:rows]))
    if full_to_swa_index_mapping is not None and swa_page_table is not None:
        swa = full_to_swa_index_mapping[heads.long().clamp(0, full_to_swa_index_mapping.numel() - 1)]
        swa_pages = torch.div(swa, page_size, rounding_mode="floor").to(swa_page_table.dtype)
        swa_page_table[:rows].copy_(torch.where(used, swa_pages, swa_page_table[:rows]))
    if full_to_swa_index_mapping is not None and out_cache_loc is not None and swa_out_cache_loc is not None:
        index = out_cache_loc.long().clamp(0, full_to_swa_index_mapping.numel() - 1)
        swa_out_cache_loc.copy_(full_to_swa_index_mapping[index].to(swa_out_cache_loc.dtype))


def draft_decode_set_expand_metadata(
    cache_seqlens_int32: torch.Tensor,
    page_table: torch.Tensor,
    last_page_lens: torch.Tensor,
    decode_length: int,
    cache_loc: torch.Tensor,
    topk: int,
    page_size: int,
) -> None:
    """The topk > 1 draft-decode expand metadata: each branch reads its prefix's last partial
    page and its ``decode_length`` draft tokens, ``cache_seqlens = decode_length + last_page_len``;
    the page table row holds the distinct consecutive pages of the branch's draft slots, written
    from column 0 (the rest of the row left alone).

    The compiled scatter addresses the table as memory (row stride, column), unchecked: a branch
    with more distinct pages than the row has columns writes on into the next row. Such stores
    collide with that row's own; the CPU version lets them land last, one outcome a replay can
    have, and drops what would fall past the table's storage."""
    cache_seqlens_int32.copy_((decode_length + last_page_lens.repeat_interleave(topk)).to(cache_seqlens_int32.dtype))
    pages = torch.div(cache_loc, page_size, rounding_mode="floor").to(torch.int32)
    if pages.dim() == 1:
        pages = pages.unsqueeze(0)
    starts = torch.ones_like(pages, dtype=torch.bool)
    starts[:, 1:] = pages[:, 1:] != pages[:, :-1]
    columns = starts.long().cumsum(dim=1) - 1
    rows = torch.arange(pages.shape[0], device=pages.device)[:, None].expand_as(columns)
    offsets = rows * page_table.stride(0) + columns * page_table.stride(1)
    memory = _memory_from(page_table)
    inside = columns < page_table.shape[1]
    for stores in (inside, ~inside & (offsets < memory.numel())):
        memory[offsets[stores]] = pages[stores].to(page_table.dtype)


def _memory_from(table: torch.Tensor) -> torch.Tensor:
    """The storage from ``table``'s first element on, flat: what a kernel handed ``table`` can address."""
    size = table.untyped_storage().nbytes() // table.element_size() - table.storage_offset()
    return table.as_strided((size,), (1,), table.storage_offset())


def _bind_normal_decode(module: ModuleType) -> Callable[..., None]:
    if any(marker in vars(module) for marker in FUSED_DECODE_MARKERS):
        return normal_decode_set_metadata
    return vars(module)["normal_decode_set_metadata"]


def _bind_draft_extend(module: ModuleType) -> Callable[..., None]:
    return draft_extend_set_metadata


def _bind_expand(module: ModuleType) -> Callable[..., None]:
    return draft_decode_set_expand_metadata


KERNELS: dict[str, Callable[[ModuleType], Callable[..., None]]] = {
    "normal_decode_set_metadata": _bind_normal_decode,
    "draft_extend_set_metadata": _bind_draft_extend,
    "draft_decode_set_expand_metadata": _bind_expand,
}
"""Launcher name -> how to make its CPU version for the module that defines it (a torch launcher
binds to itself)."""
