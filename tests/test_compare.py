"""``regtrack compare A B`` end to end: real git repositories, real SQLite, real workers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from demo_histories import DemoHistories
from gitrepo import GitRepo, git

from db.store import Store
from tracker.cli.app import main

CHECK = """read code err < value
printf '{"metrics": {"rel_err": %s, "steps": 3}}' "$err" > "$REGTRACK_METRICS"
exit "$code"
"""
COMMAND = ("--command", "sh check.sh")


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)
    return tmp_path / "home"


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """Commits whose check passes with a small error, fails with a large one, and cannot judge."""
    repo = GitRepo(tmp_path_factory.mktemp("compare") / "repo")
    shas = {
        "good": repo.commit("Add the check", {"check.sh": CHECK, "value": "0 0.001\n"}),
        "bad": repo.commit("Lose precision (#12)", {"value": "1 0.5\n"}),
        "untestable": repo.commit("Break the build", {"value": "125 0\n"}),
    }
    return repo.path, shas


def regtrack(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def compare_json(repo: Path, a: str, b: str, *options: str, exit_code: int) -> dict[str, Any]:
    result = regtrack("compare", a, b, "--repo", str(repo), *options, "--json")
    assert result.exit_code == exit_code, result.output
    return json.loads(result.stdout)


def metric(row: dict[str, Any], name: str) -> dict[str, Any]:
    return next(m for m in row["metrics"] if m["name"] == name)


def test_a_case_that_broke_exits_1_with_its_error_ratio_measured_then_reused(
    history: tuple[Path, dict[str, str]],
) -> None:
    repo, shas = history
    first = compare_json(repo, shas["good"], shas["bad"], *COMMAND, exit_code=1)
    assert first["schema"] == 1 and first["exit_status"] == 1
    assert (first["a"]["sha"], first["b"]["sha"]) == (shas["good"], shas["bad"])
    assert first["b"]["subject"] == "Lose precision (#12)"
    [row] = first["rows"]
    assert row["change"] == "broke"
    assert (row["a"]["outcome"], row["b"]["outcome"]) == ("pass", "fail")
    assert metric(row, "rel_err") == {"name": "rel_err", "a": 0.001, "b": 0.5, "ratio": 500.0, "note": None}
    assert metric(row, "steps")["ratio"] == 1.0
    assert row["duration"]["a"] > 0 and row["duration"]["b"] > 0
    assert (row["a"]["source"], row["b"]["source"]) == ("measured", "measured")
    assert [p["b"]["verdict"] for p in first["probes"]] == ["bad"]

    again = compare_json(repo, shas["good"], shas["bad"], *COMMAND, exit_code=1)
    [row] = again["rows"]
    assert (row["a"]["source"], row["b"]["source"]) == ("reused", "reused")
    assert metric(row, "rel_err")["ratio"] == 500.0


def test_the_table_shows_both_sides_the_ratio_and_where_each_result_came_from(
    history: tuple[Path, dict[str, str]],
) -> None:
    repo, shas = history
    result = regtrack("compare", shas["good"], shas["bad"], "--repo", str(repo), *COMMAND)
    assert result.exit_code == 1, result.output
    for shown in ("broke", "measured", "rel_err", "500", "duration_s", "Lose precision (#12)", "good at A, bad at B"):
        assert shown in result.stdout, result.stdout
    steps = [line for line in result.stderr.splitlines() if line.startswith("[")]
    assert [step.split()[0] for step in steps] == ["[1/2]", "[2/2]"]


def test_a_fix_exits_0(history: tuple[Path, dict[str, str]]) -> None:
    repo, shas = history
    report = compare_json(repo, shas["bad"], shas["good"], *COMMAND, exit_code=0)
    [row] = report["rows"]
    assert row["change"] == "better" and metric(row, "rel_err")["ratio"] == pytest.approx(0.002)


def test_a_side_that_cannot_be_judged_is_shown_as_such(history: tuple[Path, dict[str, str]]) -> None:
    repo, shas = history
    report = compare_json(repo, shas["good"], shas["untestable"], *COMMAND, exit_code=0)
    [probe] = report["probes"]
    assert probe["a"]["unjudged"] is None and probe["b"]["unjudged"] == "skipped"
    [row] = report["rows"]
    assert row["change"] == "worse" and row["b"]["outcome"] == "skip"


def assert_usage_error(result: Result, *fragments: str) -> None:
    """Exit 2 and one error line, nothing measured."""
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("regtrack: error: ")]
    assert len(errors) == 1 and result.stderr.strip().endswith(errors[0]), result.stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]
    with Store.open() as store:
        assert not store.runs()


def test_unknown_revision(history: tuple[Path, dict[str, str]]) -> None:
    repo, shas = history
    result = regtrack("compare", shas["good"], "nope", "--repo", str(repo), *COMMAND)
    assert_usage_error(result, "unknown revision 'nope'", "git log")


def test_two_names_of_one_commit(history: tuple[Path, dict[str, str]]) -> None:
    repo, shas = history
    result = regtrack("compare", "HEAD", shas["untestable"], "--repo", str(repo), *COMMAND)
    assert_usage_error(result, "same commit", "compare two different revisions")


def test_unknown_probe_with_json_answers_on_stdout_too(history: tuple[Path, dict[str, str]]) -> None:
    repo, shas = history
    result = regtrack("compare", shas["good"], shas["bad"], "--repo", str(repo), "--probe", "nope", "--json")
    assert_usage_error(result, "unknown probe 'nope'", "known probes")
    assert json.loads(result.stdout)["exit_code"] == 2


def test_probe_and_command_together(history: tuple[Path, dict[str, str]]) -> None:
    repo, shas = history
    result = regtrack("compare", shas["good"], shas["bad"], "--repo", str(repo), "--probe", "p", *COMMAND)
    assert_usage_error(result, "--probe or --command")


@pytest.mark.slow
def test_the_demo_culprit_against_its_parent_ranks_the_failing_probe_first(demo_histories: DemoHistories) -> None:
    repo, manifest = demo_histories.shared(60)
    culprit = manifest.bugs["target_verify_overwrite"].introduced
    parent = git(repo, "rev-parse", f"{culprit}^").strip()
    probes = ("--probe", "decode_graph_replay", "--probe", "target_verify_attention")
    report = compare_json(repo, parent, culprit, *probes, exit_code=1)
    first = report["rows"][0]
    assert first["probe"] == "target_verify_attention" and first["change"] == "broke"
    assert metric(first, "rel_err")["ratio"] > 1e3 and metric(first, "max_abs_err")["ratio"] > 1e3
    assert {row["change"] for row in report["rows"] if row["probe"] == "decode_graph_replay"} == {"same"}
    verdicts = {p["probe"]: (p["a"]["verdict"], p["b"]["verdict"]) for p in report["probes"]}
    assert verdicts == {"decode_graph_replay": ("good", "good"), "target_verify_attention": ("good", "bad")}
