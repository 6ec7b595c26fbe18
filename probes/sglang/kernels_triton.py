"""CPU versions of the triton kernels SGLang's Triton (and FlashInfer) backends build KV indices with.

``create_flashinfer_kv_indices_triton`` copies each request's token slots out of ``req_to_token``
into a flat ``kv_indices`` at ``kv_indptr[b]``; ``generate_draft_decode_kv_indices`` builds, for
every speculative step at once, the KV indices and indptr of every draft branch. Both are launched
over a grid (``kernel[grid](...)``), so their CPU versions are :class:`GridKernel` objects: the grid
says which programs run. Written from the kernels' semantics, in torch, without host syncs (every
shape is static, masked-out writes go to a sink slot), so they run eagerly and inside the CPU graph
emulation; reads and writes go through flat pointer arithmetic as the kernels' do, and every entry
a kernel does not write is left as it was.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch

Grid = tuple[int, ...]


@dataclass(frozen=True)
class GridKernel:
    """A CPU version launched as its triton kernel is: ``kernel[grid](*args, **kwargs)``.
    ``function`` takes the grid first."""

    function: Callable[..., None]
    original: Any = None
    """The revision's launcher it stands in for (compared on a GPU by ``probes.sglang.kernel_check``)."""

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        return functools.partial(self.function, _grid(grid))

    def wrapping(self, original: Any) -> GridKernel:
        """This CPU version, standing in for ``original``."""
        return GridKernel(self.function, original)

    @property
    def __wrapped__(self) -> Any:
        return self.original

    @property
    def __cpu_version__(self) -> GridKernel:
        return self

    @property
    def __name__(self) -> str:
        return self.function.__name__


def _grid(grid: Any) -> Grid:
    if isinstance(grid, int):
        return (grid,)
    return tuple(int(size) for size in grid)


def _gather(flat: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``flat[index]``, an index past either end reading the nearest entry (the kernels' masked
    loads never read there; a wrong index shows as a wrong value, not as an error)."""
    return flat[index.clamp(0, flat.numel() - 1)]


def _scatter(flat: torch.Tensor, index: torch.Tensor, values: torch.Tensor, keep: torch.Tensor) -> None:
    """``flat[index] = values`` where ``keep`` (and the index is inside ``flat``); the rest of the
    writes go to a sink slot past the end, so the shapes never depend on the data."""
    sink = flat.numel()
    inside = keep & (index >= 0) & (index < sink)
    extended = torch.cat([flat, flat.new_zeros(1)])
    extended.index_put_((torch.where(inside, index, sink).reshape(-1),), values.reshape(-1).to(flat.dtype))
    flat.copy_(extended[:sink])


def _flat(tensor: torch.Tensor) -> torch.Tensor:
    if not tensor.is_contiguous():
        raise ValueError("the CPU kernel writes a non-contiguous tensor, which its triton kernel cannot")
    return tensor.view(-1)


def create_kv_indices(
    grid: Grid,
    req_to_token: torch.Tensor,
    req_pool_indices: torch.Tensor,
    page_kernel_lens: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_start_idx: torch.Tensor | None,
    kv_indices: torch.Tensor,
    req_to_token_stride: int,
) -> None:
    """``create_flashinfer_kv_indices_triton``: program b (b < grid[0]) writes
    ``kv_indices[kv_indptr[b] + k] = req_to_token.flat[req_pool_indices[b] * stride + start_b + k]``
    for ``k < page_kernel_lens[b]``, ``start_b = kv_start_idx[b]`` (0 without it)."""
    rows = grid[0]
    if rows == 0:
        return
    width = req_to_token.shape[-1]
    columns = torch.arange(width, device=kv_indices.device)[None, :]
    starts = torch.zeros(rows, dtype=torch.long) if kv_start_idx is None else kv_start_idx[:rows].long()
    sources = req_pool_indices[:rows].long()[:, None] * req_to_token_stride + starts[:, None] + columns
    data = _gather(req_to_token.reshape(-1), sources)
    targets = kv_indptr[:rows].long()[:, None] + columns
    keep = columns < page_kernel_lens[:rows].long()[:, None]
    _scatter(_flat(kv_indices), targets, data, keep)


def generate_draft_kv_indices(
    grid: Grid,
    req_pool_indices: torch.Tensor,
    req_to_token: torch.Tensor,
    paged_kernel_lens: torch.Tensor,
    kv_indices: torch.Tensor,
    kv_indptr: torch.Tensor,
    positions: torch.Tensor,
    pool_len: int,
    kv_indices_stride: int,
    kv_indptr_stride: int,
    bs_upper: int,
    iter_upper: int,
    num_tokens_upper: int,
    page_size: int,
) -> None:
    """``generate_draft_decode_kv_indices`` over grid (steps, seqs, topk): for step s and branch
    (b, t) of ``topk`` branches, with ``L = paged_kernel_lens[b]`` and ``i = s + 1`` tokens drafted,
    the row ``kv_indices.flat[s * kv_indices_stride + off:]``, ``off = sum(L[:b]) * topk + b * i *
    topk + t * (L + i)``, gets the request's first L slots, then the i slots of branch t's drafts
    (at ``L + t * steps``, or, paged with topk > 1, on the branch's own pages); and
    ``kv_indptr.flat[s * kv_indptr_stride + z] = sum(positions[:z]) + z * i`` for every branch
    z = b * topk + t except z = 0, which writes z = seqs * topk instead."""
    steps, seqs, topk = grid
    if steps == 0 or seqs == 0 or topk == 0:
        return
    lens = paged_kernel_lens[:seqs].long()
    firsts = torch.cumsum(lens, 0) - lens
    reqs = req_pool_indices[:seqs].long() * pool_len
    branch = torch.arange(topk, device=lens.device)
    columns = torch.arange(req_to_token.shape[-1], device=lens.device)
    drafted = torch.arange(iter_upper, device=lens.device)
    table = req_to_token.reshape(-1)
    flat_indices, flat_indptr = _flat(kv_indices), _flat(kv_indptr)
    for step in range(steps):
        done = step + 1
        own = torch.arange(seqs, device=lens.device)[:, None] * done * topk + branch[None, :] * (lens[:, None] + done)
        offsets = firsts[:, None] * topk + own
        rows = (step * kv_indices_stride + offsets).reshape(-1, 1)
        row_lens, row_reqs = lens.repeat_interleave(topk)[:, None], reqs.repeat_interleave(topk)[:, None]
        prefix = _gather(table, row_reqs + columns[None, :])
        _scatter(flat_indices, rows + columns[None, :], prefix, columns[None, :] < row_lens)
        starts = _draft_starts(lens, topk, steps, page_size).reshape(-1, 1)
        drafts = _gather(table, row_reqs + starts + drafted[None, :])
        _scatter(flat_indices, rows + row_lens + drafted[None, :], drafts, drafted[None, :] < done)
        _write_draft_indptr(flat_indptr, step * kv_indptr_stride, positions, seqs * topk, done, num_tokens_upper)


def _draft_starts(lens: torch.Tensor, topk: int, steps: int, page_size: int) -> torch.Tensor:
    """[seqs, topk]: where branch t's draft tokens start in its request's row."""
    branch = torch.arange(topk, device=lens.device)[None, :]
    if page_size == 1 or topk == 1:
        return lens[:, None] + branch * steps
    last_page = torch.remainder(lens, page_size)[:, None]
    pages_per_branch = torch.div(last_page + steps + page_size - 1, page_size, rounding_mode="floor")
    base = torch.div(lens, page_size, rounding_mode="floor")[:, None] * page_size
    return base + branch * pages_per_branch * page_size + last_page


def _write_draft_indptr(
    flat: torch.Tensor, origin: int, positions: torch.Tensor, branches: int, done: int, upper: int
) -> None:
    """Entries 1..branches of one step's indptr: running sums of ``positions`` (the kernel loads at
    most ``upper`` of them) plus ``done`` tokens per branch."""
    count = min(branches, upper)
    sums = torch.cumsum(positions[:count].long(), 0)
    z = torch.arange(1, branches + 1, device=positions.device)
    bases = sums[(z - 1).clamp(max=count - 1)]
    values = bases + z * done
    index = origin + z
    _scatter(flat, index, values, torch.ones_like(index, dtype=torch.bool))


def _bind_kv_indices(module: ModuleType) -> GridKernel:
    return GridKernel(create_kv_indices)


def _bind_draft_kv_indices(module: ModuleType) -> GridKernel:
    return GridKernel(generate_draft_kv_indices)


KERNELS: dict[str, Callable[[ModuleType], GridKernel]] = {
    "create_flashinfer_kv_indices_triton": _bind_kv_indices,
    "generate_draft_decode_kv_indices": _bind_draft_kv_indices,
}
"""Launcher name -> how to make its CPU version for the module that defines it."""
