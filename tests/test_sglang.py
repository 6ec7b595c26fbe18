"""The SGLang target on SGLang-shaped histories (``tests/sglang_shaped``, this project's own code in
the real file's API eras): the probes load each revision's modules through the resilient loader,
regtrack scans the story and pairs the revert and the re-land, an unsupported era is not a
regression, a revision that reaches a stub is untestable, and reuse follows what the probe read.
Real git, real workers, real SQLite."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from cli_in import regtrack
from sglang_shaped import (
    CROSS_ERA,
    ShapedManifest,
    build_cross_era_history,
    build_sglang_shaped_history,
)

from tracker.targets.templates import template

PROBE = "sglang_trtllm_mha_target_verify"
VERDICT = {"good": "good", "bad": "bad", "unsupported": "good", "untestable": "skip"}


def configured(manifest: ShapedManifest, where: Path) -> Path:
    """A regtrack.toml from `regtrack init sglang`, beside the repository rather than in it."""
    where.mkdir()
    (where / "regtrack.toml").write_text(template("sglang").replace('repo = "."', f"repo = {str(manifest.path)!r}"))
    return where


def run_rows(where: Path, *shas: str) -> list[dict]:
    result = regtrack("run", "--probe", PROBE, *shas, "--json", cwd=where)
    assert result.exit_code in (0, 1, 3), result.output
    return json.loads(result.stdout)["rows"]


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)
    return tmp_path / "home"


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> ShapedManifest:
    return build_sglang_shaped_history(
        tmp_path_factory.mktemp("sglang") / "sglang", era="C1", bad_commits=2, reverted_commits=2
    )


def executed_attempts(home: Path) -> dict[tuple[str, int], tuple[tuple[int, ...], int]]:
    """Each executed (not copied) attempt's input sets, one per case, and its seed."""
    with sqlite3.connect(home / "data" / "regtrack.db") as db:
        rows = db.execute(
            "SELECT tree_hash, attempt, case_id, input_set_id, seed FROM runs WHERE reused_from_id IS NULL"
        ).fetchall()
    cases: dict[tuple[str, int], dict[str, int]] = {}
    seeds: dict[tuple[str, int], int] = {}
    for tree, attempt, case_id, input_set, seed in rows:
        cases.setdefault((tree, attempt), {})[case_id] = input_set
        seeds[(tree, attempt)] = seed
    return {key: (tuple(by_case[c] for c in sorted(by_case)), seeds[key]) for key, by_case in cases.items()}


@pytest.mark.slow
def test_a_scan_finds_the_story_with_its_revert_and_re_land_paired(
    story: ShapedManifest, tmp_path: Path, home: Path
) -> None:
    where = configured(story, tmp_path / "config")
    result = regtrack(
        "scan", f"{story.commits[0]}..{story.head}", "--probe", PROBE, "--max-samples", "64", "--json", cwd=where
    )
    assert result.exit_code in (0, 1), result.output
    report = json.loads(result.stdout)
    found = [(t["sha"], t["kind"], t["pairs_with"], t["pair_kind"]) for t in report["transitions"]]
    assert [(sha, kind) for sha, kind, _, _ in found] == [
        (story.introduced, "regression"),
        (story.fixed, "fix"),
        (story.reverted, "regression"),
        (story.relanded, "fix"),
    ]
    pairs = {(sha, pair_kind, pairs_with) for sha, _, pairs_with, pair_kind in found if pair_kind}
    assert (story.reverted, "reverts", story.fixed) in pairs and (story.relanded, "relands", story.fixed) in pairs
    assert {s["first"] for s in report["stretches"]} == {story.role("stub_reached")}
    # Every commit touching only files the probe never read (docs, another backend) reused a result.
    assert report["executions"] < len(story.commits)
    executed = executed_attempts(home)
    # The probe is deterministic: one attempt per tree (no confirmation reruns), all under one seed,
    # and no two executions read the same files (else the second should have been reused).
    assert len(executed) == report["executions"]
    assert len({tree for tree, _ in executed}) == len(executed)
    assert len({reads for _, (reads, _) in executed.items()}) == len(executed)
    assert {seed for _, seed in executed.values()} == {0}


@pytest.mark.slow
def test_input_tracked_reuse_runs_nothing_for_unread_files_and_runs_for_a_read_one(
    story: ShapedManifest, tmp_path: Path
) -> None:
    where = configured(story, tmp_path / "config")
    docs_only, touched = story.role("docs_only"), story.role("read_file_touched")
    [before_docs] = run_rows(where, f"{docs_only}~1")
    [after_docs] = run_rows(where, docs_only)
    assert (before_docs["reused"], after_docs["reused"], after_docs["verdict"]) == (False, True, before_docs["verdict"])
    [before_touch] = run_rows(where, f"{touched}~1")
    [after_touch] = run_rows(where, touched)
    assert after_touch["reused"] is False and after_touch["verdict"] == before_touch["verdict"]


@pytest.mark.slow
def test_a_revision_that_reaches_a_stub_is_untestable(story: ShapedManifest, tmp_path: Path) -> None:
    where = configured(story, tmp_path / "config")
    result = regtrack("run", "--probe", PROBE, story.role("stub_reached"), "--json", cwd=where)
    assert result.exit_code == 3, result.output
    [row] = json.loads(result.stdout)["rows"]
    assert row["verdict"] == "skip" and "stub reached" in row["signature"]


@pytest.mark.slow
def test_every_era_is_judged_by_its_behaviour_and_an_unsupported_one_is_no_regression(tmp_path: Path) -> None:
    crossing = build_cross_era_history(tmp_path / "sglang", bad_commits=1, reverted_commits=1)
    assert crossing.era == CROSS_ERA
    where = configured(crossing, tmp_path / "config")
    eras = sorted(set(crossing.eras.values()))
    picked = [crossing.first_of_era(era) for era in eras] + [crossing.introduced, crossing.reverted, crossing.relanded]
    rows = {row["sha"]: row for row in run_rows(where, *picked)}
    assert {sha: rows[sha]["verdict"] for sha in picked} == {sha: VERDICT[crossing.expected[sha]] for sha in picked}
    unsupported = [sha for sha in picked if sha in crossing.with_expectation("unsupported")]
    # A1 serves target verify with T == N only: its T != N cases are skips, its T == N case passes
    assert unsupported and all(
        rows[sha]["cases"] == {"N4-T2": "skip", "N3-T5": "skip", "N4-T4": "pass", "topk2-N4": "skip"}
        for sha in unsupported
    )
    result = regtrack(
        "scan", f"{crossing.commits[0]}..{crossing.first_of_era('B')}", "--probe", PROBE, "--json", cwd=where
    )
    assert result.exit_code in (0, 1), result.output
    assert [t["kind"] for t in json.loads(result.stdout)["transitions"]] == []  # unsupported -> good is not a fix


def test_init_writes_the_sglang_target_once(tmp_path: Path) -> None:
    checkout = tmp_path / "sglang"
    checkout.mkdir()
    written = regtrack("init", "sglang", str(checkout), cwd=tmp_path)
    assert written.exit_code == 0, written.output
    assert (checkout / "regtrack.toml").read_text() == template("sglang")
    assert regtrack("init", "sglang", "--print", cwd=tmp_path).stdout == template("sglang")
    again = regtrack("init", "sglang", str(checkout), cwd=tmp_path)
    assert again.exit_code == 2 and again.stderr.count("\n") == 1 and "exists" in again.stderr
    missing = regtrack("init", "sglang", str(tmp_path / "nowhere"), cwd=tmp_path)
    assert missing.exit_code == 2 and "not a directory" in missing.stderr
    assert regtrack("init", "vllm", str(checkout), cwd=tmp_path).exit_code == 2
