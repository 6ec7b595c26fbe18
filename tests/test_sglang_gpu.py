"""The SGLang target on the GPU, on SGLang-shaped revisions: FlashInfer XQA under a CUDA graph with
the metadata each revision's backend produced passes the fp32 reference at a fixed revision and
fails it at a buggy one; the CPU metadata kernels match the revision's triton kernels exactly, and
a kernel changed by one page no longer matches; a bisect through the CLI and its workers names the
culprit and, asked again, runs nothing. Skipped without CUDA."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_in import regtrack
from sglang_shaped import ShapedManifest, build_sglang_shaped_history

from probes import Outcome, ProbeContext, run_probe
from probes.sglang import target_verify_attention
from probes.sglang.kernel_check import check_kernels
from tracker.targets.templates import template

pytestmark = pytest.mark.gpu

SGLANG_PROBE_MODULES = ("target_verify_metadata", "decode_graph_replay", "swa_page_table", "target_verify_attention")
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


def test_a_bisect_with_the_gpu_probe_names_the_culprit_and_asked_again_runs_nothing(
    story: ShapedManifest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)
    # The template names every SGLang probe; where the project is not installed (no entry points,
    # as on a bare GPU machine) their modules are named here, for this process and the workers.
    monkeypatch.setenv("REGTRACK_PROBE_MODULES", ",".join(f"probes.sglang.{name}" for name in SGLANG_PROBE_MODULES))
    where = tmp_path / "config"
    where.mkdir()
    (where / "regtrack.toml").write_text(template("sglang").replace('repo = "."', f"repo = {str(story.path)!r}"))
    args = ("bisect", "--probe", "sglang_target_verify_attention", "--device", "cuda", "--dtype", "bfloat16")
    answers = []
    for _ in range(2):
        result = regtrack(*args, "--good", story.commits[0], "--bad", story.introduced, "--json", cwd=where)
        assert result.exit_code == 1, result.output
        answers.append(json.loads(result.stdout))
    first, again = answers
    print(f"bisect: {first['executions']} executions, culprit {first['culprit'][:10]}; again: {again['executions']}")
    assert story.expected[story.commits[0]] == "good" and first["culprit"] == story.introduced
    assert first["executions"] > 0 and (again["culprit"], again["executions"], again["session"]) == (story.introduced, 0, None)
