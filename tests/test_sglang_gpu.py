"""The SGLang target on the GPU, on SGLang-shaped revisions: FlashInfer XQA under a CUDA graph with
the metadata each revision's backend produced passes the fp32 reference at a fixed revision and
fails it at a buggy one; the CPU metadata kernels match the revision's triton kernels exactly, and
a kernel changed by one page no longer matches. Skipped without CUDA."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from sglang_shaped import ShapedManifest, build_sglang_shaped_history

from probes import Outcome, ProbeContext, run_probe
from probes.sglang import target_verify_attention
from probes.sglang.kernel_check import check_kernels

pytestmark = pytest.mark.gpu

PAGE_WRITE = "tl.store(out, (slots // PAGE_SIZE).to(tl.int32), mask=mask)"


def materialised(manifest: ShapedManifest, sha: str, where: Path) -> Path:
    where.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(manifest.path), "archive", sha], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive, check=True)
    return where


def cuda(root: Path) -> ProbeContext:
    return ProbeContext(root=root, device="cuda", dtype="bfloat16", import_roots=("python",))


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> ShapedManifest:
    return build_sglang_shaped_history(tmp_path_factory.mktemp("sglang") / "sglang", era="D2", bad_commits=1, reverted_commits=1)


def test_xqa_with_the_replayed_metadata_passes_when_fixed_and_fails_when_buggy(story: ShapedManifest, tmp_path: Path) -> None:
    figures = {}
    for role, sha in [("fixed", story.fixed), ("introduced", story.introduced)]:
        [result] = run_probe(target_verify_attention.PROBE, cuda(materialised(story, sha, tmp_path / role)))
        figures[role] = result.result
        print(f"{role}: {result.result.outcome.value} rel_err={result.result.metrics.get('rel_err')} {result.result.detail}")
    assert figures["fixed"].outcome is Outcome.PASS, figures["fixed"]
    assert figures["introduced"].outcome is Outcome.FAIL and figures["introduced"].metrics["rel_err"] > 0.1


def test_the_cpu_kernels_match_the_revisions_triton_kernels_and_a_changed_one_does_not(story: ShapedManifest, tmp_path: Path) -> None:
    root = materialised(story, story.head, tmp_path / "head")
    comparisons = check_kernels(cuda(root))
    assert {c.kernel.rpartition(".")[2] for c in comparisons} == {"build_trtllm_mha_page_table", "update_trtllm_mha_graph_metadata"}
    assert [c for c in comparisons if c.mismatched] == []
    [kernel_file] = [p for p in root.rglob("*.py") if PAGE_WRITE in p.read_text()]
    kernel_file.write_text(kernel_file.read_text().replace(PAGE_WRITE, PAGE_WRITE.replace("// PAGE_SIZE)", "// PAGE_SIZE + 1)")))
    changed = check_kernels(cuda(root))
    assert any("page_table" in c.mismatched for c in changed if c.kernel.endswith("build_trtllm_mha_page_table"))
