"""The SGLang target on the GPU, on SGLang-shaped revisions: FlashInfer XQA under a CUDA graph with
the metadata each revision's backend produced passes the fp32 reference at a fixed revision and
fails it at a buggy one; the CPU metadata kernels match the revision's triton kernels exactly, and
a kernel changed by one page no longer matches; a bisect through the CLI and its workers names the
culprit and, asked again, runs nothing; run and scan asked again start no worker; an nvidia-smi that
words the GPU otherwise than the worker is overruled by the worker. Skipped without CUDA."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from cli_in import regtrack
from sglang_shaped import ShapedManifest, build_sglang_shaped_history

from probes import ProbeContext, run_probe
from probes.sglang import target_verify_attention
from probes.sglang.kernel_check import check_kernels
from tracker.core.verdicts import Outcome
from tracker.targets.templates import template
from tracker.workspace import Workspace

pytestmark = pytest.mark.gpu

SGLANG_PROBE_MODULES = ("family", "swa_page_table", "target_verify_attention", "gpu.probes")
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
    return build_sglang_shaped_history(
        tmp_path_factory.mktemp("sglang") / "sglang", era="D2", bad_commits=1, reverted_commits=1
    )


def test_xqa_with_the_replayed_metadata_passes_when_fixed_and_fails_when_buggy(
    story: ShapedManifest, tmp_path: Path
) -> None:
    figures = {}
    for role, sha in [("fixed", story.fixed), ("introduced", story.introduced)]:
        [result] = run_probe(target_verify_attention.PROBE, cuda(materialised(story, sha, tmp_path / role)))
        figures[role] = result.result
        print(
            f"{role}: {result.result.outcome.value} "
            f"rel_err={result.result.metrics.get('rel_err')} {result.result.detail}"
        )
    assert figures["fixed"].outcome is Outcome.PASS, figures["fixed"]
    assert figures["introduced"].outcome is Outcome.FAIL and figures["introduced"].metrics["rel_err"] > 0.1


def test_the_cpu_kernels_match_the_revisions_triton_kernels_and_a_changed_one_does_not(
    story: ShapedManifest, tmp_path: Path
) -> None:
    root = materialised(story, story.head, tmp_path / "head")
    comparisons = check_kernels(cuda(root))
    assert {c.kernel.rpartition(".")[2] for c in comparisons} >= {
        "build_trtllm_mha_page_table",
        "update_trtllm_mha_graph_metadata",
    }
    assert [c for c in comparisons if c.mismatched] == []
    [kernel_file] = [p for p in root.rglob("*.py") if PAGE_WRITE in p.read_text()]
    kernel_file.write_text(
        kernel_file.read_text().replace(PAGE_WRITE, PAGE_WRITE.replace("// PAGE_SIZE)", "// PAGE_SIZE + 1)"))
    )
    changed = check_kernels(cuda(root))
    assert any("page_table" in c.mismatched for c in changed if c.kernel.endswith("build_trtllm_mha_page_table"))


@pytest.fixture
def config_dir(story: ShapedManifest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory whose ``regtrack.toml`` is the SGLang template on the shaped history, with a store of its own."""
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)
    # The template names every SGLang probe; where the project is not installed (no entry points,
    # as on a bare GPU machine) their modules are named here, for this process and the workers.
    monkeypatch.setenv("REGTRACK_PROBE_MODULES", ",".join(f"probes.sglang.{name}" for name in SGLANG_PROBE_MODULES))
    where = tmp_path / "config"
    where.mkdir()
    config = template("sglang", "cuda").replace('repo = "."', f"repo = {str(story.path)!r}")
    (where / "regtrack.toml").write_text(config)
    return where


GPU_PROBE = ("--probe", "sglang_target_verify_attention", "--device", "cuda", "--dtype", "bfloat16")


def test_a_bisect_with_the_gpu_probe_names_the_culprit_and_asked_again_runs_nothing(
    story: ShapedManifest, config_dir: Path
) -> None:
    answers = []
    for _ in range(2):
        result = regtrack(
            "bisect", *GPU_PROBE, "--good", story.commits[0], "--bad", story.introduced, "--json", cwd=config_dir
        )
        assert result.exit_code == 1, result.output
        answers.append(json.loads(result.stdout))
    first, again = answers
    print(f"bisect: {first['executions']} executions, culprit {first['culprit'][:10]}; again: {again['executions']}")
    assert story.expected[story.commits[0]] == "good" and first["culprit"] == story.introduced
    assert first["executions"] > 0 and (again["culprit"], again["executions"], again["session"]) == (
        story.introduced,
        0,
        None,
    )


def worker_starts(home: Path) -> int:
    """How many probe workers have started, from the first line each writes to its log."""
    return sum(log.read_text(errors="replace").count("probe worker ") for log in home.rglob("worker-*.log"))


def test_run_and_scan_asked_again_start_no_worker(story: ShapedManifest, config_dir: Path, tmp_path: Path) -> None:
    """nvidia-smi tells the GPU: with every result stored, no worker imports torch to describe it."""
    home = tmp_path / "home"
    span = f"{story.commits[0]}..{story.introduced}"
    for command, answer in [
        (("run", story.commits[0], story.introduced), lambda out: [(r["sha"], r["verdict"]) for r in out["rows"]]),
        (("scan", span), lambda out: out["transitions"]),
    ]:
        began = time.perf_counter()
        first = regtrack(*command, *GPU_PROBE, "--json", cwd=config_dir)
        assert first.exit_code == 1, first.output
        started, asked = worker_starts(home), time.perf_counter()
        again = regtrack(*command, *GPU_PROBE, "--json", cwd=config_dir)
        print(
            f"{command[0]}: {asked - began:.2f} s first ({started} worker starts so far); asked again "
            f"{time.perf_counter() - asked:.2f} s, {worker_starts(home) - started} worker starts"
        )
        assert started > 0 and worker_starts(home) == started
        assert answer(json.loads(again.stdout)) == answer(json.loads(first.stdout)) and again.exit_code == 1


def test_a_gpu_that_nvidia_smi_words_otherwise_is_measured_again_as_its_worker_tells_it(
    story: ShapedManifest, config_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An nvidia-smi that renames the GPU: the worker, whose torch names it, refutes the description
    before its first job, and the command measures again under the worker's words, the only ones
    results are stored under."""
    real = shutil.which("nvidia-smi")
    assert real is not None
    renaming = tmp_path / "bin" / "nvidia-smi"
    renaming.parent.mkdir()
    renaming.write_text(f"#!/bin/sh\n{shlex.quote(real)} \"$@\" | sed 's/^NVIDIA [^,]*,/Renamed GPU,/'\n")
    renaming.chmod(0o755)
    monkeypatch.setenv("PATH", f"{renaming.parent}{os.pathsep}{os.environ['PATH']}")
    result = regtrack("run", story.introduced, *GPU_PROBE, "--json", cwd=config_dir)
    print(result.stderr)
    assert result.exit_code == 1 and [r["verdict"] for r in json.loads(result.stdout)["rows"]] == ["bad"], result.output
    assert "nvidia-smi as Renamed GPU" in result.stderr and "measuring again" in result.stderr
    with Workspace.open(cwd=config_dir) as ws:
        stored = [env.gpu_name for _, env in ws.store.environments(ws.store.repository(ws.repo.path))]
    assert len(stored) == 1 and stored[0] is not None and stored[0].startswith("NVIDIA ")
