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
from probes.sglang.family import BACKENDS, revision_module
from probes.sglang.loader import load_sglang

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
    """Every known kernel with trials that the revision at ``ctx.root`` loads with the backends of
    the probe family it holds, compared over random trials."""
    results = []
    trials = {**TRIALS, **FA3_TRIALS, **TRITON_TRIALS}
    with revision(ctx.import_paths):
        loaded = load_sglang(ctx, stub_gpu_libraries=False)
        try:
            for module in map(revision_module, BACKENDS):
                if loaded.has_source(module):
                    loaded.module(module)
            for qualified in sorted(loaded.ledger.substituted):
                module_name, _, name = qualified.rpartition(".")
                if name not in trials:
                    continue
                module = importlib.import_module(module_name)
                substitute = getattr(module, name)
                real, cpu = substitute.__wrapped__, substitute.__cpu_version__
                if name in TRITON_TRIALS:
                    real, cpu = grid_launch(real), grid_launch(cpu)
                for label, arguments in trials[name](module, torch.Generator().manual_seed(seed)):
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


def _fa3_decode_trials(module: Any, generator: torch.Generator) -> Iterator[tuple[str, dict[str, Any]]]:
    """FA3's fused ``normal_decode_set_metadata``: every row's first ``max_seq_pages`` columns."""
    for page, bs, delta, pages in [(1, 3, 0, 40), (16, 4, 1, 12), (64, 8, 3, 5), (128, 17, 0, 0)]:
        width, pool = 1024, 32
        arguments: dict[str, Any] = dict(
            cache_seqlens_int32=torch.full((bs,), SENTINEL, dtype=torch.int32),
            cu_seqlens_k=torch.full((bs + 1,), SENTINEL, dtype=torch.int32),
            page_table=torch.full((bs, pages + 3), SENTINEL, dtype=torch.int32),
            req_to_token=_pool(generator, pool, width),
            req_pool_indices=torch.randperm(pool, generator=generator)[:bs],
            strided_indices=torch.arange(0, width, page),
            max_seq_pages=pages,
            seq_lens=torch.randint(1, width - delta, (bs,), generator=generator),
            seq_len_delta=delta,
            page_size=page,
        )
        yield f"fa3 decode page={page} bs={bs} delta={delta} pages={pages}", _to_cuda(arguments)


def _fa3_draft_extend_trials(module: Any, generator: torch.Generator) -> Iterator[tuple[str, dict[str, Any]]]:
    """FA3's ``draft_extend_set_metadata``: only the pages of each row's length, SWA or not."""
    for page, bs, swa in [(1, 3, False), (16, 4, True), (64, 8, False), (128, 5, True)]:
        width, pool, tokens = 1024, 32, 3
        pages = -(-width // page)
        arguments: dict[str, Any] = dict(
            cache_seqlens_int32=torch.full((bs,), SENTINEL, dtype=torch.int32),
            cu_seqlens_k=torch.full((bs + 1,), SENTINEL, dtype=torch.int32),
            cu_seqlens_q=torch.full((bs + 1,), SENTINEL, dtype=torch.int32),
            page_table=torch.full((bs, pages), SENTINEL, dtype=torch.int32),
            req_to_token=_pool(generator, pool, width),
            req_pool_indices=torch.randperm(pool, generator=generator)[:bs],
            seq_lens=torch.randint(1, width + 1, (bs,), generator=generator),
            extend_seq_lens=torch.randint(1, tokens + 1, (bs,), generator=generator, dtype=torch.int32),
            page_size=page,
        )
        if swa:
            arguments.update(
                full_to_swa_index_mapping=_swa_mapping(generator, pool * width),
                swa_page_table=torch.full((bs, pages), SENTINEL, dtype=torch.int32),
                out_cache_loc=torch.randint(0, pool * width, (bs * tokens,), generator=generator),
                swa_out_cache_loc=torch.full((bs * tokens,), SENTINEL, dtype=torch.int64),
            )
        yield f"fa3 draft extend page={page} bs={bs} swa={swa}", _to_cuda(arguments)


def _fa3_expand_trials(module: Any, generator: torch.Generator) -> Iterator[tuple[str, dict[str, Any]]]:
    """FA3's compiled ``draft_decode_set_expand_metadata``: each branch's distinct draft pages from
    column 0 of its (decode_length + 1)-wide row, the rest of the row left alone."""
    for page, bs, topk, decode_length in [(1, 2, 2, 1), (4, 3, 2, 3), (16, 4, 4, 2), (64, 2, 3, 4)]:
        rows = bs * topk
        partial = torch.randint(0, page, (bs,), generator=generator)
        starts = torch.randint(1, 4096, (rows,), generator=generator) * page + partial.repeat_interleave(topk)
        arguments: dict[str, Any] = dict(
            cache_seqlens_int32=torch.full((rows,), SENTINEL, dtype=torch.int32),
            page_table=torch.full((rows, decode_length + 1), SENTINEL, dtype=torch.int32),
            last_page_lens=partial,
            decode_length=decode_length,
            cache_loc=starts[:, None] + torch.arange(decode_length)[None, :],
            topk=topk,
            page_size=page,
        )
        yield f"fa3 draft expand page={page} bs={bs} topk={topk} decode_length={decode_length}", _to_cuda(arguments)


FA3_TRIALS: dict[str, Callable[[Any, torch.Generator], Iterator[tuple[str, dict[str, Any]]]]] = {
    "normal_decode_set_metadata": _fa3_decode_trials,
    "draft_extend_set_metadata": _fa3_draft_extend_trials,
    "draft_decode_set_expand_metadata": _fa3_expand_trials,
}
"""FA3's metadata launchers (``probes.sglang.kernels_fa3``): the triton ones, and the compiled
expand one; a revision's plain torch ``normal_decode_set_metadata`` is compared with itself."""


def grid_launch(kernel: Any) -> Callable[..., None]:
    """A grid-launched kernel (triton's, or its ``probes.sglang.kernels_triton`` CPU version) as
    one call, ``kernel[grid](*arguments)``: positional, in the trial's order, as SGLang launches
    them (the CPU versions' parameter names are their own); each trial carries its ``grid``."""

    def launch(grid: tuple[int, ...], **arguments: Any) -> None:
        kernel[grid](*arguments.values())

    return launch


def _kv_indices_trials(module: Any, generator: torch.Generator) -> Iterator[tuple[str, dict[str, Any]]]:
    """``create_flashinfer_kv_indices_triton``: each program's slots at its indptr, with and
    without start offsets; a grid shorter than the batch leaves the other rows alone."""
    for bs, programs, starts in [(1, 1, False), (4, 4, True), (17, 17, False), (9, 6, True)]:
        width, pool = 1024, 32
        offsets = torch.randint(0, 200, (bs,), generator=generator, dtype=torch.int32)
        lens = torch.randint(0, width - 200, (bs,), generator=generator, dtype=torch.int32)
        kv_indptr = torch.nn.functional.pad(torch.cumsum(lens, 0), (1, 0)).to(torch.int32)
        arguments: dict[str, Any] = dict(
            grid=(programs,),
            req_to_token_ptr=_pool(generator, pool, width),
            req_pool_indices_ptr=torch.randperm(pool, generator=generator)[:bs],
            page_kernel_lens_ptr=lens,
            kv_indptr=kv_indptr,
            kv_start_idx=offsets if starts else None,
            kv_indices_ptr=torch.full((int(lens.sum()) + 64,), SENTINEL, dtype=torch.int64),
            req_to_token_ptr_stride=width,
        )
        yield f"kv indices bs={bs} programs={programs} starts={starts}", _to_cuda(arguments)


def _draft_kv_indices_trials(module: Any, generator: torch.Generator) -> Iterator[tuple[str, dict[str, Any]]]:
    """``generate_draft_decode_kv_indices``: every step's indices and indptr, topk 1 and > 1,
    paged and not (the indptr's first entry is never written)."""
    for steps, seqs, topk, page in [(3, 1, 1, 1), (3, 4, 1, 16), (4, 3, 2, 1), (3, 5, 4, 64)]:
        width, pool = 1024, 32
        lens = torch.randint(1, width - 4 * page - topk * steps, (seqs,), generator=generator, dtype=torch.int32)
        branches = seqs * topk
        arguments: dict[str, Any] = dict(
            grid=(steps, seqs, topk),
            req_pool_indices=torch.randperm(pool, generator=generator)[:seqs],
            req_to_token=_pool(generator, pool, width),
            paged_kernel_lens=lens,
            kv_indices=torch.full((steps, branches * width), SENTINEL, dtype=torch.int64),
            kv_indptr=torch.full((steps, branches + 1), SENTINEL, dtype=torch.int32),
            positions=lens.repeat_interleave(topk).to(torch.int64),
            pool_len=width,
            kv_indices_stride=branches * width,
            kv_indptr_stride=branches + 1,
            bs_upper=1 << max(seqs - 1, 0).bit_length(),
            iter_upper=1 << (steps - 1).bit_length(),
            num_tokens_upper=1 << max(branches - 1, 0).bit_length(),
            page_size=page,
        )
        yield f"draft kv indices steps={steps} seqs={seqs} topk={topk} page={page}", _to_cuda(arguments)


TRITON_TRIALS: dict[str, Callable[[Any, torch.Generator], Iterator[tuple[str, dict[str, Any]]]]] = {
    "create_flashinfer_kv_indices_triton": _kv_indices_trials,
    "generate_draft_decode_kv_indices": _draft_kv_indices_trials,
}
"""The grid-launched KV-index kernels (``probes.sglang.kernels_triton``): compare
``grid_launch(cpu)`` with ``grid_launch(real)``."""


def check_flashinfer_wrappers(seed: int = 0) -> list[KernelComparison]:
    """FlashInfer's real CUDA-graph wrappers against their CPU stand-ins
    (``probes.sglang.kernels_flashinfer``): the same plans, compared buffer by buffer (a custom
    mask packed per request). Needs CUDA and flashinfer."""
    import flashinfer

    from probes.sglang import kernels_flashinfer as cpu

    generator, results = torch.Generator().manual_seed(seed), []
    for bs, mask in [(1, False), (4, True), (9, True)]:
        kv_lens = torch.randint(1, 300, (bs,), generator=generator, dtype=torch.int32)
        q_lens = torch.full((bs,), 3, dtype=torch.int32)
        layout = dict(
            qo=torch.nn.functional.pad(torch.cumsum(q_lens, 0), (1, 0)).to(torch.int32),
            kv=torch.nn.functional.pad(torch.cumsum(kv_lens, 0), (1, 0)).to(torch.int32),
            indices=torch.randint(0, 1 << 16, (int(kv_lens.sum()),), generator=generator, dtype=torch.int32),
            mask=torch.rand(int((q_lens * kv_lens).sum()), generator=generator) < 0.5 if mask else None,
        )
        for kind in ("decode", "prefill"):
            real_buffers, cpu_buffers = _wrapper_buffers(bs, "cuda"), _wrapper_buffers(bs, "cpu")
            _plan(flashinfer, kind, real_buffers, layout, "cuda")
            _plan(cpu, kind, cpu_buffers, layout, "cpu")
            torch.cuda.synchronize()
            wrong = tuple(k for k, v in real_buffers.items() if not torch.equal(v.cpu(), cpu_buffers[k]))
            results.append(KernelComparison(f"flashinfer.{kind} wrapper", f"bs={bs} mask={mask}", wrong))
    return results


def _wrapper_buffers(bs: int, device: str) -> dict[str, torch.Tensor]:
    return {
        "qo_indptr": torch.full((bs + 1,), SENTINEL, dtype=torch.int32, device=device),
        "kv_indptr": torch.full((bs + 1,), SENTINEL, dtype=torch.int32, device=device),
        "kv_indices": torch.full((bs * 512,), SENTINEL, dtype=torch.int32, device=device),
        "last_page_len": torch.full((bs,), SENTINEL, dtype=torch.int32, device=device),
        "mask": torch.zeros(bs * 512 * 3, dtype=torch.uint8, device=device),
        "mask_indptr": torch.full((bs + 1,), SENTINEL, dtype=torch.int32, device=device),
    }


def _plan(library: Any, kind: str, b: dict[str, torch.Tensor], layout: dict[str, Any], device: str) -> None:
    """A CUDA-graph wrapper of ``library`` over the buffers ``b``, planned with ``layout``."""
    on = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in layout.items()}
    ones = torch.ones(b["last_page_len"].numel(), dtype=torch.int32, device=device)
    workspace = torch.empty(128 << 20, dtype=torch.uint8, device=device)
    if kind == "decode":
        wrapper = library.BatchDecodeWithPagedKVCacheWrapper(
            workspace,
            "NHD",
            use_cuda_graph=True,
            paged_kv_indptr_buffer=b["kv_indptr"],
            paged_kv_indices_buffer=b["kv_indices"],
            paged_kv_last_page_len_buffer=b["last_page_len"],
        )
        wrapper.plan(on["kv"], on["indices"], ones, 8, 2, 64, 1, data_type=torch.bfloat16, q_data_type=torch.bfloat16)
        return
    masked = on["mask"] is not None
    extra = dict(custom_mask_buf=b["mask"], mask_indptr_buf=b["mask_indptr"]) if masked else {}
    wrapper = library.BatchPrefillWithPagedKVCacheWrapper(
        workspace,
        "NHD",
        use_cuda_graph=True,
        qo_indptr_buf=b["qo_indptr"],
        paged_kv_indptr_buf=b["kv_indptr"],
        paged_kv_indices_buf=b["kv_indices"],
        paged_kv_last_page_len_buf=b["last_page_len"],
        **extra,
    )
    wrapper.plan(
        on["qo"],
        on["kv"],
        on["indices"],
        ones,
        8,
        2,
        64,
        1,
        custom_mask=on["mask"],
        q_data_type=torch.bfloat16,
        kv_data_type=torch.bfloat16,
    )
