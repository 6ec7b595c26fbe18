"""Ranges longer than SQLite lets one statement bind (32,766 parameters): every query that
filters by commits or trees binds them a chunk at a time, so a 50,000-commit range is bisected,
answered again from the store, and asked about, like a short one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_in import regtrack
from gitrepo import linear_history

COMMITS = 50_000
FIRST_BAD = 37_123


@pytest.fixture
def history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)
    check = f"test $(cat value.txt) -lt {FIRST_BAD}\n"
    return linear_history(tmp_path / "repo", COMMITS, lambda i: {"value.txt": f"{i}\n", "check.sh": check})


@pytest.mark.slow
def test_a_range_of_50000_stored_trees_is_bisected_answered_again_and_listed(
    history: list[str], tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    args = (
        "bisect",
        "--command",
        "sh check.sh",
        "--good",
        history[0],
        "--bad",
        history[-1],
        "--strategy",
        "binary",
        "--json",
    )
    first = regtrack(*args, cwd=repo)
    assert first.exit_code == 1, first.output
    report = json.loads(first.stdout)
    assert report["culprit"] == history[FIRST_BAD]
    assert report["executions"] <= 2 + 16, "binary search over 50,000 commits"

    again = json.loads(regtrack(*args, cwd=repo).stdout)
    assert (again["culprit"], again["executions"], again["session"]) == (history[FIRST_BAD], 0, None)

    listed = regtrack("history", "--range", f"{history[0]}..{history[-1]}", "--json", "--limit", "1000", cwd=repo)
    assert listed.exit_code == 0, listed.output
    runs = json.loads(listed.stdout)["runs"]
    assert {run["sha"] for run in runs} == {step["sha"] for step in report["steps"]}
