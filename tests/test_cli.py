"""regtrack's commands end to end on the demo history: real git, real SQLite, real workers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from demo_histories import DemoHistories
from gitrepo import GitRepo

from tracker.cli.app import main
from tracker.demo.bugs import BROKEN_IMPORT, TARGET_VERIFY_OVERWRITE, apply_edits, read_tree, write_tree
from tracker.demo.history import DemoManifest

PROJECT_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, demo_histories: DemoHistories) -> tuple[Path, DemoManifest]:
    path = tmp_path_factory.mktemp("history") / "demo"
    return path, demo_histories.copy(150, path)


@pytest.fixture(autouse=True)
def regtrack_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)
    return tmp_path / "home"


def regtrack(*args: str, cwd: Path | None = None) -> Result:
    runner = CliRunner()
    if cwd is None:
        return runner.invoke(main, list(args), catch_exceptions=False)
    old = Path.cwd()
    os.chdir(cwd)
    try:
        return runner.invoke(main, list(args), catch_exceptions=False)
    finally:
        os.chdir(old)


def bisect_json(repo: Path, good: str, bad: str, probe: str = "target_verify_metadata") -> dict:
    result = regtrack("bisect", "--repo", str(repo), "--good", good, "--bad", bad, "--probe", probe, "--json")
    assert result.exit_code == 1, result.output
    return json.loads(result.stdout)


def parent(repo: Path, sha: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "rev-parse", f"{sha}^1"], capture_output=True, text=True, check=True
    ).stdout.strip()


def repository_state(repo: Path) -> tuple[str, str, bytes]:
    status = subprocess.run(
        ["git", "-C", str(repo), "status", "--porcelain", "--no-optional-locks"], capture_output=True, text=True
    ).stdout
    head = (repo / ".git" / "HEAD").read_text() + subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout
    return status, head, (repo / ".git" / "index").read_bytes()


@pytest.mark.slow
def test_bisect_names_the_commit_that_slipped_the_bug_in_and_leaves_the_checkout_alone(
    demo: tuple[Path, DemoManifest],
) -> None:
    repo, manifest = demo
    (repo / "scratch.txt").write_text("the user's uncommitted work\n")
    before = repository_state(repo)
    overwrite = manifest.bugs["target_verify_overwrite"]
    report = bisect_json(repo, manifest.untestable.mended, parent(repo, overwrite.fixed))
    assert report["culprit"] == overwrite.introduced
    assert report["subject"].startswith("[Spec v2]") and report["pr_number"]
    assert "max_seq_len_q off by +2" in report["culprit_result"]["signature"]
    assert report["parent_result"]["verdict"] == "good"
    assert report["executions"] <= 9  # ceil(log2 n) + 2 for the ~60 commits of the range
    assert repository_state(repo) == before
    (repo / "scratch.txt").unlink()

    again = bisect_json(repo, manifest.untestable.mended, parent(repo, overwrite.fixed))
    assert again["culprit"] == overwrite.introduced
    assert again["executions"] == 0 and again["rounds"] == 0
    assert again["steps"] and all(step["reused"] for step in again["steps"])


def test_bisect_from_the_fix_into_the_revert_stretch_names_the_revert(demo: tuple[Path, DemoManifest]) -> None:
    repo, manifest = demo
    overwrite = manifest.bugs["target_verify_overwrite"]
    report = bisect_json(repo, overwrite.fixed, parent(repo, overwrite.relanded or ""))
    assert report["culprit"] == overwrite.reverted
    assert report["subject"].startswith('Revert "Fix TRTLLM target verify query metadata')


def test_bisect_across_the_untestable_stretch_converges(demo: tuple[Path, DemoManifest]) -> None:
    repo, manifest = demo
    swa = manifest.bugs["swa_partial_page"]
    root = subprocess.run(
        ["git", "-C", str(repo), "rev-list", "--max-parents=0", "HEAD"], capture_output=True, text=True
    ).stdout.split()[0]
    report = bisect_json(repo, root, parent(repo, swa.fixed), probe="swa_page_table")
    assert report["culprit"] == swa.introduced or swa.introduced in report["candidates"]
    skipped = [s for s in report["steps"] if s["verdict"] == "skip"]
    assert len(skipped) <= 3


def test_when_only_untestable_commits_remain_the_answer_is_the_range(tmp_path: Path) -> None:
    """A bug introduced inside an untestable stretch can only be placed among it."""
    source = read_tree(PROJECT_ROOT)
    repo = GitRepo(tmp_path / "repo")
    states = [
        [],
        [BROKEN_IMPORT],
        [BROKEN_IMPORT, TARGET_VERIFY_OVERWRITE.edit],
        [BROKEN_IMPORT, TARGET_VERIFY_OVERWRITE.edit],
        [TARGET_VERIFY_OVERWRITE.edit],
    ]
    shas = []
    for n, edits in enumerate(states):
        write_tree(apply_edits(source, edits), repo.path)
        shas.append(repo.commit(f"step {n}"))
    report = bisect_json(repo.path, shas[0], shas[-1])
    assert report["culprit"] is None
    assert report["candidates"] == [shas[1], shas[2], shas[4]]  # step 3 has step 2's tree: it cannot be the culprit


def test_a_commit_outside_the_target_paths_reuses_its_parents_result(demo: tuple[Path, DemoManifest]) -> None:
    repo, manifest = demo
    head = manifest.head
    first = regtrack("run", "--repo", str(repo), "--probe", "swa_page_table", "--json", parent(repo, head))
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["rows"][0]["reused"] is False
    second = regtrack("run", "--repo", str(repo), "--probe", "swa_page_table", "--json", head)
    assert json.loads(second.stdout)["rows"][0]["reused"] is True
    shown = regtrack("show", "--repo", str(repo), "--json", head)
    assert shown.exit_code == 0
    assert json.loads(shown.stdout)["commit"]["sha"] == head


def test_history_lists_stored_runs(demo: tuple[Path, DemoManifest]) -> None:
    repo, manifest = demo
    assert regtrack("run", "--repo", str(repo), "--probe", "swa_page_table", manifest.head).exit_code == 0
    listed = regtrack("history", "--repo", str(repo), "--json")
    runs = json.loads(listed.stdout)["runs"]
    assert {r["probe_name"] for r in runs} == {"swa_page_table"} and len(runs) == 3
    assert "swa_page_table" in regtrack("history", "--repo", str(repo)).stdout


def test_show_says_why_each_case_could_not_be_judged(demo: tuple[Path, DemoManifest]) -> None:
    """On the CPU the attention probe's FlashInfer cases skip, saying why only in their detail."""
    repo, manifest = demo
    assert regtrack("run", "--repo", str(repo), "--probe", "target_verify_attention", manifest.head).exit_code == 0
    runs = json.loads(regtrack("show", "--repo", str(repo), "--json", manifest.head).stdout)["runs"]
    skipped = [r for r in runs if r["outcome"] == "skip"]
    assert skipped and all((r["signature"], r["reason"]) == (None, "case needs a CUDA device") for r in skipped)
    assert all(r["reason"] is None for r in runs if r["outcome"] == "pass")
    table = regtrack("show", "--repo", str(repo), manifest.head).stdout
    assert table.count("case needs a CUDA") == len(skipped)


def ran_a_step(line: str) -> bool:
    """A progress line of a revision measured now, not read from the store."""
    return line.startswith("[") and "(stored)" not in line


@pytest.mark.slow
def test_a_killed_bisect_resumes_with_the_same_answer(demo: tuple[Path, DemoManifest], regtrack_home: Path) -> None:
    repo, manifest = demo
    overwrite = manifest.bugs["target_verify_overwrite"]
    args = ["bisect", "--repo", str(repo), "--probe", "target_verify_metadata", "--json"]
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tracker.cli",
            *args,
            "--good",
            manifest.untestable.mended,
            "--bad",
            parent(repo, overwrite.fixed),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        if process.stderr and ran_a_step(process.stderr.readline()):
            break
    process.send_signal(signal.SIGKILL)
    process.wait()
    resumed = regtrack(*args, "--resume")
    assert resumed.exit_code == 1, resumed.output
    report = json.loads(resumed.stdout)
    assert report["culprit"] == overwrite.introduced
    measured = [step["sha"] for step in report["steps"]]
    assert measured.count(manifest.untestable.mended) == 1, "the good end, measured before the kill, was measured again"


def bisect_with(repo: Path, good: str, bad: str, *options: str, probe: str = "target_verify_metadata") -> dict:
    result = regtrack("bisect", "--repo", str(repo), "--good", good, "--bad", bad, "--probe", probe, "--json", *options)
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


@pytest.mark.slow
def test_more_workers_take_fewer_rounds_to_the_same_culprit(
    demo: tuple[Path, DemoManifest], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, manifest = demo
    overwrite = manifest.bugs["target_verify_overwrite"]
    ends = (manifest.untestable.mended, parent(repo, overwrite.fixed))
    reports = {}
    for strategy, workers in (("binary", "1"), ("kary", "3")):
        monkeypatch.setenv("REGTRACK_DB_URL", f"sqlite:///{tmp_path / strategy}.sqlite")  # nothing stored to reuse
        reports[strategy] = bisect_with(repo, *ends, "--strategy", strategy, "--workers", workers)
    assert reports["binary"]["culprit"] == reports["kary"]["culprit"] == overwrite.introduced
    assert reports["binary"]["confidence"] == reports["kary"]["confidence"] == 1.0
    assert reports["kary"]["rounds"] < reports["binary"]["rounds"]
    assert reports["kary"]["executions"] >= reports["binary"]["executions"]


@pytest.mark.slow
def test_auto_bisects_the_flaky_stretch_and_learns_that_the_probe_flakes(demo: tuple[Path, DemoManifest]) -> None:
    """Seed 2000 makes the flaky bug's first run at the bad end pass: a contradiction for bisection."""
    repo, manifest = demo
    overwrite = manifest.bugs["target_verify_overwrite"]
    first = bisect_with(
        repo, overwrite.relanded or "", manifest.flaky.last, "--seed", "2000", probe="decode_graph_replay"
    )
    assert first["switch_reason"] == "the bad end passed"
    assert first["culprit"] == manifest.flaky.first and not first["no_culprit"]
    assert 0.95 <= first["confidence"] < 1.0
    assert first["fail_rate_before"] == 0.0 and 0.0 < first["fail_rate_after"] < 1.0
    assert first["rounds"] == first["executions"] - 1  # one worker: the two ends share a round, then one run per round

    again = bisect_with(
        repo,
        manifest.untestable.mended,
        manifest.flaky.last,
        "--max-runs",
        "2",
        "--seed",
        "2000",
        probe="decode_graph_replay",
    )
    assert again["flake_rate_prior"] > 0
    assert again["switch_reason"].startswith("the probe's flake rate in history")
    assert again["executions"] <= 2


def test_max_runs_bounds_the_executions_and_leaves_the_candidates(demo: tuple[Path, DemoManifest]) -> None:
    repo, manifest = demo
    overwrite = manifest.bugs["target_verify_overwrite"]
    report = bisect_with(
        repo, manifest.untestable.mended, parent(repo, overwrite.fixed), "--strategy", "binary", "--max-runs", "3"
    )
    assert report["executions"] == 3
    assert report["culprit"] is None and overwrite.introduced in report["candidates"] and len(report["candidates"]) > 1
