"""The CPU metadata kernels (``probes.sglang.kernels``) against a revision's real triton kernels.

Needs a CUDA device and triton: the revision is loaded with its real GPU libraries, each known
launcher it defines is run on random CUDA inputs and its CPU version on CPU copies of the same
inputs, and every tensor argument (the launchers write their outputs in place) is compared
exactly. Output buffers start filled with a sentinel, so what a kernel must leave alone is
compared too.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from probes.api import ProbeContext
from probes.loader import revision
from probes.sglang.loader import BACKEND_MODULE, load_sglang

SENTINEL = -7


@dataclass(frozen=True)
class KernelComparison:
    kernel: str
    """``module.function`` of the revision."""
    trial: str
    mismatched: tuple[str, ...]
    """The tensor arguments whose contents differ between the real kernel and the CPU version."""


def compare(cpu: Callable[..., Any], real: Callable[..., Any], arguments: dict[str, Any]) -> tuple[str, ...]:
    """Run ``real`` on ``arguments`` (CUDA tensors) and ``cpu`` on CPU copies; the names of the
    tensor arguments that differ afterwards."""
    on_device = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in arguments.items()}
    on_host = {k: v.cpu().clone() if isinstance(v, torch.Tensor) else v for k, v in arguments.items()}
    real(**on_device)
    if any(isinstance(v, torch.Tensor) and v.is_cuda for v in on_device.values()):
        torch.cuda.synchronize()
    cpu(**on_host)
    return tuple(
        name
        for name, value in on_device.items()
        if isinstance(value, torch.Tensor) and not torch.equal(value.cpu(), on_host[name])
    )


def check_kernels(ctx: ProbeContext, seed: int = 0) -> list[KernelComparison]:
    """Every known kernel the revision at ``ctx.root`` defines, compared over random trials."""
    results = []
    with revision(ctx.import_paths):
        loaded = load_sglang(ctx, stub_gpu_libraries=False)
        try:
            loaded.module(BACKEND_MODULE)
            for qualified in sorted(loaded.ledger.substituted):
                module_name, _, name = qualified.rpartition(".")
                module = importlib.import_module(module_name)
                substitute = getattr(module, name)
                real, cpu = substitute.__wrapped__, substitute.__cpu_version__
                for label, arguments in TRIALS[name](module, torch.Generator().manual_seed(seed)):
                    results.append(KernelComparison(qualified, label, compare(cpu, real, arguments)))
        finally:
            loaded.close()
    return results


def _pool(generator: torch.Generator, pool: int, width: int) -> torch.Tensor:
    return torch.randint(0, pool * width, (pool, width), generator=generator, dtype=torch.int32)


def _swa_mapping(generator: torch.Generator, size: int) -> torch.Tensor:
    mapping = torch.randint(0, size, (size + 1,), generator=generator, dtype=torch.int64)
    mapping[-1] = -1
    return mapping


def _page_table_trials(module: Any, generator: torch.Generator) -> Iterator[tuple[str, dict[str, Any]]]:
    for page, bs, swa in [(1, 3, False), (16, 4, True), (64, 8, False), (128, 17, True)]:
        width, pool = 1024, 32
        req_to_token = _pool(generator, pool, width)
        pages = -(-width // page)
        arguments: dict[str, Any] = dict(
            req_to_token=req_to_token,
            req_pool_indices=torch.randperm(pool, generator=generator)[:bs],
            cache_seqlens=torch.randint(1, width + 1, (bs,), generator=generator, dtype=torch.int32),
            page_table=torch.full((bs, pages), SENTINEL, dtype=torch.int32),
            page_size=page,
        )
        if swa:
            arguments["swa_page_table"] = torch.full((bs, pages), SENTINEL, dtype=torch.int32)
            arguments["full_to_swa"] = _swa_mapping(generator, pool * width)
        yield f"page={page} bs={bs} swa={swa}", _to_cuda(arguments)


def _graph_metadata_trials(module: Any, generator: torch.Generator) -> Iterator[tuple[str, dict[str, Any]]]:
    modes = {
        name: int(getattr(module, name, default))
        for name, default in (("Q_MODE_NONE", 0), ("Q_MODE_CUMSUM", 1), ("Q_MODE_STRIDED", 2))
    }
    for page, bs, offset, mode, swa in [
        (1, 1, 0, "Q_MODE_NONE", False),
        (16, 3, 2, "Q_MODE_CUMSUM", True),
        (64, 8, 4, "Q_MODE_STRIDED", False),
        (128, 17, 1, "Q_MODE_NONE", True),
    ]:
        width, pool = 2048, 32
        pages = 12
        req_to_token = _pool(generator, pool, width)
        arguments: dict[str, Any] = dict(
            req_pool_indices=torch.randperm(pool, generator=generator)[:bs],
            seq_lens=torch.randint(1, min(width, pages * page) - offset, (bs,), generator=generator, dtype=torch.int32),
            req_to_token=req_to_token,
            cache_seqlens=torch.full((bs,), SENTINEL, dtype=torch.int32),
            cu_seqlens_k=torch.zeros(bs + 1, dtype=torch.int32),
            page_table=torch.full((bs, pages + 2), SENTINEL, dtype=torch.int32),
            bs=bs,
            seqlen_offset=offset,
            max_seq_pages=pages,
            page_size=page,
            cu_seqlens_q=torch.zeros(bs + 1, dtype=torch.int32),
            qlens=torch.randint(1, 6, (bs,), generator=generator, dtype=torch.int32),
            q_stride=4,
            q_mode=modes[mode],
        )
        if swa:
            mapping = _swa_mapping(generator, pool * width)
            out_cache_loc = torch.randint(0, pool * width, (bs,), generator=generator)
            out_cache_loc[0] = -1
            arguments.update(
                swa_mapping=mapping,
                swa_page_table=torch.full((bs, pages + 2), SENTINEL, dtype=torch.int32),
                out_cache_loc=out_cache_loc,
                swa_out_cache_loc=torch.full((bs + 5,), 123, dtype=torch.int64),
            )
        yield f"page={page} bs={bs} offset={offset} {mode} swa={swa}", _to_cuda(arguments)


def _to_cuda(arguments: dict[str, Any]) -> dict[str, Any]:
    return {k: v.cuda() if isinstance(v, torch.Tensor) else v for k, v in arguments.items()}


TRIALS: dict[str, Callable[[Any, torch.Generator], Iterator[tuple[str, dict[str, Any]]]]] = {
    "build_trtllm_mha_page_table": _page_table_trials,
    "update_trtllm_mha_graph_metadata": _graph_metadata_trials,
}
