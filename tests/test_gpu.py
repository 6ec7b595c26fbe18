"""The probes on a CUDA device in bf16: pass at HEAD, fail on the planted bugs, and the
attention comparison fails on a known-wrong mask. Skipped without CUDA."""

from __future__ import annotations

from pathlib import Path

import pytest

from probes import ProbeContext, get_probe, run_probe, summarize
from probes.demo_backend import NAMES as DEMO_PROBES
from probes.demo_backend.checks import attention_metrics, attention_verdict, tolerance_for
from probes.demo_backend.scenario import make_scenario
from probes.loader import load_backend
from tracker.core.verdicts import Outcome
from tracker.demo.bugs import SWA_PARTIAL_PAGE, TARGET_VERIFY_OVERWRITE, apply_edits, read_tree, write_tree
from tracker.execution.executors import LocalExecutor

pytestmark = pytest.mark.gpu

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def cuda_ctx(root: Path, seed: int = 0) -> ProbeContext:
    return ProbeContext(root=root, device="cuda", dtype="bfloat16", seed=seed)


@pytest.mark.parametrize("probe", DEMO_PROBES)
def test_every_demo_probe_and_case_passes_at_head_on_cuda(probe: str) -> None:
    """The demo backend's probes on this project's own tree (not every registered probe: another
    test module may have registered probes of other subjects, such as SGLang's)."""
    results = run_probe(get_probe(probe), cuda_ctx(PROJECT_ROOT))
    assert {r.case.id: r.result.outcome for r in results} == {r.case.id: Outcome.PASS for r in results}, [
        (r.case.id, r.result.signature, r.result.detail) for r in results if r.result.outcome is not Outcome.PASS
    ]


def test_overwrite_bug_gives_wrong_attention_under_a_cuda_graph(tmp_path: Path) -> None:
    write_tree(apply_edits(read_tree(PROJECT_ROOT), [TARGET_VERIFY_OVERWRITE.edit]), tmp_path)
    attention = run_probe(get_probe("target_verify_attention"), cuda_ctx(tmp_path))
    assert all(r.result.outcome is Outcome.FAIL for r in attention), [(r.case.id, r.result) for r in attention]
    assert min(r.result.metrics["rel_err"] for r in attention) > 0.1
    metadata = summarize(run_probe(get_probe("target_verify_metadata"), cuda_ctx(tmp_path)))
    assert metadata.outcome is Outcome.FAIL


def test_swa_bug_fails_on_cuda(tmp_path: Path) -> None:
    write_tree(apply_edits(read_tree(PROJECT_ROOT), [SWA_PARTIAL_PAGE.edit]), tmp_path)
    assert summarize(run_probe(get_probe("swa_page_table"), cuda_ctx(tmp_path))).outcome is Outcome.FAIL


@pytest.mark.parametrize("kernel", ["xqa", "fa2", "fa3"])
def test_eager_target_verify_matches_the_reference(kernel: str) -> None:
    scn, q, reference = _eager_target_verify(kernel)
    tolerance = tolerance_for("bfloat16")
    metrics = attention_metrics(scn.backend.forward(q), reference, tolerance)
    print(f"{kernel} eager target verify rel_err={metrics['rel_err']:.2e} max_abs_err={metrics['max_abs_err']:.2e}")
    assert attention_verdict(metrics, tolerance) is Outcome.PASS, metrics


def test_xqa_with_a_non_causal_mask_fails_the_comparison() -> None:
    """Every draft row sees every draft token: a known-wrong kernel output must fail."""
    scn, q, reference = _eager_target_verify("xqa")
    mask = scn.backend.eager_kernel.mask
    mask.copy_(mask[:, -1:, :].expand_as(mask))
    tolerance = tolerance_for("bfloat16")
    metrics = attention_metrics(scn.backend.forward(q), reference, tolerance)
    print(f"xqa non-causal mask rel_err={metrics['rel_err']:.2e}")
    assert attention_verdict(metrics, tolerance) is Outcome.FAIL


def _eager_target_verify(kernel: str):  # type: ignore[no-untyped-def]
    bk = load_backend(PROJECT_ROOT)
    scn = make_scenario(bk, cuda_ctx(PROJECT_ROOT), page_size=16, draft_tokens=4, kernel=kernel)
    T, prefixes = 4, [17, 300, 64, 129]
    kv_lens = [p + T for p in prefixes]
    req = scn.admit(kv_lens)
    q = scn.random_q(len(prefixes) * T)
    scn.backend.init_forward_metadata(scn.forward_batch(bk.ForwardMode.TARGET_VERIFY, req, prefixes, T))
    return scn, q, scn.reference(req, kv_lens, q, T)


def test_nvidia_smi_tells_the_gpu_as_a_worker_reports_it(tmp_path: Path) -> None:
    """What a bisect that reads the store looks results up by, and what the worker that stored them reported."""
    with (
        LocalExecutor("cuda", log_dir=tmp_path, gpu_told_by_nvidia_smi=True) as told,
        LocalExecutor("cuda", log_dir=tmp_path) as asked,
    ):
        predicted, reported = told.environment(), asked.environment()
    print(f"told {predicted}; reported {reported}")
    assert predicted.gpu_name is not None and predicted == reported
