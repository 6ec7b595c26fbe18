"""The GPU consequence probes of the FA3, Triton and FlashInfer backends (``sglang_<backend>_attention``).

On the CPU: the kernels' arguments built from a real SGLang revision's replayed metadata read the
batch's true KV slots and query rows, and without CUDA every case is a skip. On the GPU (marked
``gpu``): each backend's kernel under a CUDA graph with the revision's replayed metadata agrees
with the fp32 reference, and the same metadata with every KV length N too long does not; the CPU
metadata kernels match the revision's real ones exactly, and a kernel changed by one slot does
not; FlashInfer's CUDA-graph wrappers and their CPU stand-ins plan the same buffers. The revision
is an extracted SGLang tree (``$REGTRACK_SGLANG_SNAPSHOT``, holding ``python/sglang``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from probes import ProbeContext, get_probe, run_probe
from probes.api import ProbeResult
from probes.loader import revision
from probes.sglang.backends.base import Mode
from probes.sglang.gpu import fa3, flashinfer, judge, triton
from probes.sglang.gpu.probes import MODES, probe_name
from probes.sglang.gpu.replayed import DRAFT_TOKENS, Replayed, Snapshot
from probes.sglang.kernel_check import TRITON_TRIALS, check_flashinfer_wrappers, check_kernels
from probes.sglang.session import Subject, guarded
from tracker.core.verdicts import Outcome

SNAPSHOT = Path(os.environ.get("REGTRACK_SGLANG_SNAPSHOT", "/tmp/snap/main"))
KERNELS: dict[str, judge.Kernel] = {"fa3": fa3.KERNEL, "triton": triton.KERNEL, "flashinfer": flashinfer.KERNEL}
CASES = [(backend, mode) for backend, modes in MODES.items() for mode in modes]

needs_snapshot = pytest.mark.skipif(
    not (SNAPSHOT / "python" / "sglang").is_dir(), reason=f"no extracted SGLang revision at {SNAPSHOT}"
)


def context(device: str = "cpu") -> ProbeContext:
    return ProbeContext(root=SNAPSHOT, device=device, dtype="bfloat16", import_roots=("python",))


def within_revision(
    backend: str, mode: str, then: Callable[[Subject, Replayed], ProbeResult], device: str = "cpu"
) -> ProbeResult:
    """``then(subject, replayed)`` inside the revision's case, with the scenario's replayed metadata."""
    kernel, ctx = KERNELS[backend], context(device)

    def judged(subject: Subject) -> ProbeResult:
        replayed = judge.replayed_for(subject, Mode(mode), kernel)
        assert isinstance(replayed, Replayed), replayed
        return then(subject, replayed)

    with revision(ctx.import_paths):
        kernel.prepare(ctx)
        return guarded(ctx, judged, kernel.adapter)


def expected_slots(replayed: Replayed) -> list[torch.Tensor]:
    rows = replayed.req_to_token[replayed.batch.req_pool_indices]
    return [row[:kv].long() for row, kv in zip(rows, replayed.batch.kv_lens)]


def planned_slots(backend: str, replayed: Replayed, arguments: object) -> list[torch.Tensor]:
    """The KV slots each request's call reads, from the kernel's arguments alone."""
    bs = replayed.batch.size
    if backend == "fa3":
        return arguments.kv_slots(replayed.shape.page_size)  # type: ignore[attr-defined]
    tensors = arguments.tensors if backend == "triton" else vars(arguments)  # type: ignore[attr-defined]
    indptr, indices = tensors["kv_indptr"], tensors["kv_indices"]
    slots = [indices[int(indptr[b]) : int(indptr[b + 1])].long() for b in range(bs)]
    if backend == "triton" and replayed.shape.mode is not Mode.DECODE:
        own = replayed.batch.out_cache_loc.view(bs, -1)
        slots = [torch.cat([prefix, own[b]]) for b, prefix in enumerate(slots)]
    return slots


@needs_snapshot
@pytest.mark.parametrize(("backend", "mode"), CASES)
def test_the_kernel_arguments_from_the_replayed_metadata_read_the_batchs_true_slots_and_rows(
    backend: str, mode: str
) -> None:
    def check(subject: Subject, replayed: Replayed) -> ProbeResult:
        arguments = KERNELS[backend].arguments(replayed, replayed.replayed)
        assert [s.tolist() for s in planned_slots(backend, replayed, arguments)] == [
            s.tolist() for s in expected_slots(replayed)
        ]
        qo = getattr(arguments, "qo_indptr", None)
        if backend == "triton":
            qo = arguments.tensors.get("qo_indptr")  # type: ignore[attr-defined]
        if qo is not None:
            T = replayed.batch.tokens_per_req
            assert qo.tolist() == list(range(0, (replayed.batch.size + 1) * T, T))
        return ProbeResult(Outcome.PASS)

    result = within_revision(backend, mode, check)
    assert result.outcome is Outcome.PASS, result


@pytest.mark.parametrize("backend", list(MODES))
def test_without_cuda_every_case_is_a_skip(backend: str, tmp_path: Path) -> None:
    results = run_probe(get_probe(probe_name(backend)), ProbeContext(root=tmp_path, import_roots=("python",)))
    assert [r.case.id for r in results] == list(MODES[backend])
    assert {r.result.outcome for r in results} == {Outcome.SKIP}


def kv_too_long(backend: str, replayed: Replayed, extra: int) -> Replayed:
    """The replayed metadata with every request's KV ``extra`` tokens longer (its own next slots)."""
    live = replayed.replayed
    if backend == "fa3":
        wrong = live.with_tensors(cache_seqlens_int32=live.tensors["cache_seqlens_int32"] + extra)
        return replace(replayed, replayed=wrong)
    bs = replayed.batch.size
    indptr, indices = live.tensors["kv_indptr"].clone(), live.tensors["kv_indices"].clone()
    rows = replayed.req_to_token[replayed.batch.req_pool_indices]
    lengths = torch.diff(indptr[: bs + 1].long()) + extra
    indptr[1 : bs + 1] = torch.cumsum(lengths, 0).to(indptr.dtype)
    flat = torch.cat([rows[b, : int(lengths[b])] for b in range(bs)])
    indices[: flat.numel()] = flat.to(indices.dtype)
    wrong: Snapshot = live.with_tensors(kv_indptr=indptr, kv_indices=indices)
    return replace(replayed, replayed=wrong)


@pytest.mark.gpu
@needs_snapshot
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize(("backend", "mode"), CASES)
def test_the_kernel_with_the_replayed_metadata_passes_and_with_kv_lengths_plus_n_fails(backend: str, mode: str) -> None:
    kernel, device = KERNELS[backend], torch.device("cuda")
    if kernel.missing():
        pytest.skip(kernel.missing())
    found: dict[str, ProbeResult] = {}

    def both(subject: Subject, replayed: Replayed) -> ProbeResult:
        found["right"] = judge.measure(replayed, kernel, subject, device, seed=0)
        found["wrong"] = judge.measure(kv_too_long(backend, replayed, DRAFT_TOKENS), kernel, subject, device, seed=0)
        return ProbeResult(Outcome.PASS)

    within_revision(backend, mode, both, device="cuda")
    right, wrong = found["right"], found["wrong"]
    print(f"{backend} {mode}: rel_err {right.metrics['rel_err']:.3g}, with KV+N {wrong.metrics['rel_err']:.3g}")
    assert right.outcome is Outcome.PASS, right
    assert wrong.outcome is Outcome.FAIL and wrong.metrics["rel_err"] > right.metrics["rel_err"], wrong


KV_INDICES_STORE = "tl.store(kv_indices_ptr + kv_indices_offset + offset, data, mask=mask)"


@pytest.mark.gpu
@needs_snapshot
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_cpu_metadata_kernels_match_the_revisions_real_ones_and_a_changed_one_does_not(tmp_path: Path) -> None:
    comparisons = check_kernels(context("cuda"))
    kernels = {c.kernel.rpartition(".")[2] for c in comparisons}
    print(f"{len(comparisons)} trials over {', '.join(sorted(kernels))}")
    assert set(TRITON_TRIALS) <= kernels, kernels
    assert [f"{c.kernel} {c.trial}: {c.mismatched}" for c in comparisons if c.mismatched] == []

    changed = tmp_path / "changed"
    shutil.copytree(SNAPSHOT / "python", changed / "python", symlinks=True)
    [kernel_file] = [p for p in (changed / "python").rglob("*.py") if KV_INDICES_STORE in p.read_text()]
    kernel_file.write_text(
        kernel_file.read_text().replace(KV_INDICES_STORE, KV_INDICES_STORE.replace("offset,", "offset + 1,"))
    )
    ctx = ProbeContext(root=changed, device="cuda", dtype="bfloat16", import_roots=("python",))
    mismatched = [c for c in check_kernels(ctx) if c.mismatched]
    assert {c.kernel.rpartition(".")[2] for c in mismatched} == {"create_flashinfer_kv_indices_triton"}, mismatched


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_flashinfer_wrapper_stand_ins_plan_the_buffers_flashinfer_plans() -> None:
    pytest.importorskip("flashinfer")
    comparisons = check_flashinfer_wrappers()
    print(f"{len(comparisons)} FlashInfer wrapper plans compared")
    assert len(comparisons) == 6
    assert [f"{c.kernel} {c.trial}: {c.mismatched}" for c in comparisons if c.mismatched] == []
