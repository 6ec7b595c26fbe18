"""CPU versions of the triton kernels SGLang's TRTLLM MHA backend builds its metadata with.

Written from the kernels' semantics (what each writes where, including the rows and columns it
leaves alone; the page-table kernel in its later, index-guarded form), in torch, without host
syncs, so they run both eagerly and inside the CPU graph emulation. Integer division truncates
toward zero, as triton's does. ``substitute`` puts them in place of the revision's launchers as
their modules load; the launcher each replaced stays reachable as ``__wrapped__``, which
``probes.sglang.kernel_check`` compares on a GPU.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch

from probes.sglang.kernels_fa3 import KERNELS as FA3_KERNELS
from probes.sglang.kernels_triton import KERNELS as TRITON_KERNELS
from probes.sglang.stubs import StubLedger

Q_MODE_NONE, Q_MODE_CUMSUM, Q_MODE_STRIDED = 0, 1, 2
"""The fused kernel's cu_seqlens_q modes, unless the revision's module says otherwise."""


class KernelArgumentError(TypeError):
    """The revision calls a known kernel with an argument its CPU version does not know."""


def _idiv(values: torch.Tensor, divisor: int) -> torch.Tensor:
    return torch.div(values, divisor, rounding_mode="trunc")


def _refuse_unknown(name: str, extra: dict[str, Any]) -> None:
    unknown = sorted(key for key, value in extra.items() if value is not None)
    if unknown:
        raise KernelArgumentError(f"{name}: the CPU version does not know argument(s) {', '.join(unknown)}")


def build_page_table(
    req_to_token: torch.Tensor,
    req_pool_indices: torch.Tensor,
    cache_seqlens: torch.Tensor,
    page_table: torch.Tensor,
    page_size: int,
    swa_page_table: torch.Tensor | None = None,
    full_to_swa: torch.Tensor | None = None,
    **extra: Any,
) -> None:
    """``build_trtllm_mha_page_table``: for every row b of ``page_table`` and every page p below
    ``ceil(cache_seqlens[b] / page_size)``, write ``req_to_token[req b, p * page_size] // page_size``
    (and the SWA page of that slot); every other entry is left as it was."""
    _refuse_unknown("build_trtllm_mha_page_table", extra)
    if (full_to_swa is None) != (swa_page_table is None):
        raise AssertionError("full_to_swa and swa_page_table must be provided together")
    rows, width = page_table.shape
    columns = torch.arange(width, device=page_table.device)
    positions = columns * page_size
    inside = positions < req_to_token.shape[1]
    slots = req_to_token[
        req_pool_indices[:rows].long()[:, None], positions.clamp(max=req_to_token.shape[1] - 1)[None, :]
    ]
    pages_needed = _idiv(cache_seqlens[:rows].long() + page_size - 1, page_size)
    used = (columns[None, :] < pages_needed[:, None]) & inside[None, :]
    page_table.copy_(torch.where(used, _idiv(slots, page_size).to(page_table.dtype), page_table))
    if swa_page_table is not None and full_to_swa is not None:
        index = slots.long().clamp(0, full_to_swa.numel() - 1)
        swa_pages = _idiv(full_to_swa[index], page_size).to(swa_page_table.dtype)
        swa_page_table.copy_(torch.where(used, swa_pages, swa_page_table))


def update_graph_metadata(
    *,
    req_pool_indices: torch.Tensor,
    seq_lens: torch.Tensor,
    req_to_token: torch.Tensor,
    cache_seqlens: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    page_table: torch.Tensor,
    bs: int,
    seqlen_offset: int,
    max_seq_pages: int,
    page_size: int,
    swa_mapping: torch.Tensor | None = None,
    swa_page_table: torch.Tensor | None = None,
    out_cache_loc: torch.Tensor | None = None,
    swa_out_cache_loc: torch.Tensor | None = None,
    cu_seqlens_q: torch.Tensor | None = None,
    qlens: torch.Tensor | None = None,
    q_stride: int = 0,
    q_mode: int = Q_MODE_NONE,
    modes: tuple[int, int, int] = (Q_MODE_NONE, Q_MODE_CUMSUM, Q_MODE_STRIDED),
    **extra: Any,
) -> None:
    """``update_trtllm_mha_graph_metadata``: one launch that writes, for the first ``bs`` rows,
    ``cache_seqlens = seq_lens + seqlen_offset``, ``cu_seqlens_k[1:] = cumsum(cache_seqlens)``, the
    first ``max_seq_pages`` page-table columns (no per-request bound: every column is rewritten),
    the SWA page table and write locations, and ``cu_seqlens_q`` by ``q_mode``."""
    _refuse_unknown("update_trtllm_mha_graph_metadata", extra)
    if bs == 0:
        return
    lengths = (seq_lens[:bs] + seqlen_offset).to(torch.int32)
    cache_seqlens[:bs].copy_(lengths)
    cu_seqlens_k[1 : bs + 1].copy_(torch.cumsum(lengths, 0).to(cu_seqlens_k.dtype))
    tokens = _page_heads(req_to_token, req_pool_indices[:bs], max_seq_pages, page_size)
    page_table[:bs, :max_seq_pages].copy_(_idiv(tokens, page_size).to(page_table.dtype))
    if swa_page_table is not None and swa_mapping is not None:
        swa_tokens = _translate(swa_mapping, tokens.long(), missing=-1)
        swa_pages = torch.where(swa_tokens < 0, -1, _idiv(swa_tokens, page_size))
        swa_page_table[:bs, :max_seq_pages].copy_(swa_pages.to(swa_page_table.dtype))
    _write_cu_seqlens_q(cu_seqlens_q, qlens, bs, q_stride, q_mode, modes)
    if swa_out_cache_loc is not None and swa_mapping is not None:
        _write_swa_out(swa_out_cache_loc, out_cache_loc, swa_mapping)


def _page_heads(req_to_token: torch.Tensor, req_pool_indices: torch.Tensor, pages: int, page_size: int) -> torch.Tensor:
    """``req_to_token[req, p * page_size]`` for p < pages, read as the kernel does: by pointer
    arithmetic on the row stride, so a column past the row's end reads the next row."""
    flat = req_to_token.reshape(-1)
    start = req_pool_indices.long()[:, None] * req_to_token.stride(0)
    offsets = torch.arange(pages, device=req_to_token.device)[None, :] * page_size
    return flat[(start + offsets).clamp(max=flat.numel() - 1)]


def _translate(mapping: torch.Tensor, index: torch.Tensor, missing: int) -> torch.Tensor:
    """``mapping[index]`` where ``index >= 0``, else ``missing``."""
    safe = index.clamp(min=0, max=mapping.numel() - 1)
    return torch.where(index >= 0, mapping[safe].long(), missing)


def _write_cu_seqlens_q(
    cu_seqlens_q: torch.Tensor | None,
    qlens: torch.Tensor | None,
    bs: int,
    q_stride: int,
    q_mode: int,
    modes: tuple[int, int, int],
) -> None:
    _, cumsum, strided = modes
    if cu_seqlens_q is None:
        return
    if q_mode == cumsum and qlens is not None:
        cu_seqlens_q[1 : bs + 1].copy_(torch.cumsum(qlens[:bs].to(torch.int32), 0).to(cu_seqlens_q.dtype))
    elif q_mode == strided:
        steps = torch.arange(1, bs + 1, device=cu_seqlens_q.device) * q_stride
        cu_seqlens_q[1 : bs + 1].copy_(steps.to(cu_seqlens_q.dtype))


def _write_swa_out(swa_out: torch.Tensor, out_cache_loc: torch.Tensor | None, mapping: torch.Tensor) -> None:
    """The translated write locations, zero past the real ones (the kernel's padded tail)."""
    real = 0 if out_cache_loc is None else min(swa_out.shape[0], out_cache_loc.shape[0])
    result = torch.zeros_like(swa_out)
    if out_cache_loc is not None and real:
        result[:real] = _translate(mapping, out_cache_loc[:real].long(), missing=-1).to(swa_out.dtype)
    swa_out.copy_(result)


def _bind_update(module: ModuleType) -> Callable[..., None]:
    modes = (
        int(getattr(module, "Q_MODE_NONE", Q_MODE_NONE)),
        int(getattr(module, "Q_MODE_CUMSUM", Q_MODE_CUMSUM)),
        int(getattr(module, "Q_MODE_STRIDED", Q_MODE_STRIDED)),
    )
    return functools.partial(update_graph_metadata, modes=modes)


def _bind_page_table(module: ModuleType) -> Callable[..., None]:
    return build_page_table


KNOWN_KERNELS: dict[str, Callable[[ModuleType], Callable[..., None]]] = {
    "build_trtllm_mha_page_table": _bind_page_table,
    "update_trtllm_mha_graph_metadata": _bind_update,
    **FA3_KERNELS,
    **TRITON_KERNELS,
}
"""Launcher name -> how to make its CPU version for the module that defines it."""


def substitute(module: ModuleType, ledger: StubLedger) -> None:
    """Replace each known launcher that ``module`` itself defines by its CPU version."""
    for name, bind in KNOWN_KERNELS.items():
        original = vars(module).get(name)
        if original is None or getattr(original, "__module__", None) != module.__name__:
            continue
        version = bind(module)
        setattr(module, name, _named(version, name, original))
        ledger.substituted[f"{module.__name__}.{name}"] = f"{__name__}.{_target_name(version)}"


def _named(function: Callable[..., None], name: str, original: Any) -> Callable[..., None]:
    wrapping = getattr(function, "wrapping", None)
    if wrapping is not None:
        return wrapping(original)  # a grid-launched kernel (``kernel[grid](...)``) stands in as itself

    @functools.wraps(original)
    def cpu_kernel(*args: Any, **kwargs: Any) -> None:
        function(*args, **kwargs)

    cpu_kernel.__module__ = __name__
    cpu_kernel.__cpu_version__ = function  # type: ignore[attr-defined]
    return cpu_kernel


def _target_name(function: Callable[..., None]) -> str:
    inner = function.func if isinstance(function, functools.partial) else function
    return getattr(inner, "__name__", "?")
