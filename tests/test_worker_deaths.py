"""A deterministic probe's result is final, but a worker's death is not its result: a scan reruns a
crashed (or timed-out) tree once, even for a deterministic probe. A crash that does not come back
makes the tree flaky, never a regression and its fix; one that comes back stands. Real git, a
probe file of the repository, real workers killed by a real signal, real SQLite, the CLI."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from cli_in import regtrack
from gitrepo import GitRepo

PROBE_FILE = """\
import os, signal
from pathlib import Path
from probes import Case, Probe, ProbeResult


def check(ctx, params):
    if "sigbus" in os.listdir(ctx.root / "lib"):
        mark = Path(os.environ["DEATH_MARKS"]) / ctx.root.name
        if params["always"] or not mark.exists():
            mark.write_text("died here once")
            os.kill(os.getpid(), signal.SIGBUS)
    return ProbeResult.passed()


ONCE = Probe("dies_once", 1, "dies the first time it sees lib/sigbus", (Case("only", {"always": False}),), check,
             deterministic=True)
ALWAYS = Probe("dies_always", 1, "dies whenever it sees lib/sigbus", (Case("only", {"always": True}),), check,
               deterministic=True)
"""

CONFIG = """\
[targets.lib]
repo = "."
paths = ["lib"]
[targets.lib.probes.dies_once]
module = "ci/probe.py:ONCE"
[targets.lib.probes.dies_always]
module = "ci/probe.py:ALWAYS"
"""


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[GitRepo, list[str]]:
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)
    (tmp_path / "marks").mkdir()
    monkeypatch.setenv("DEATH_MARKS", str(tmp_path / "marks"))
    repo = GitRepo(tmp_path / "lib")
    shas = [repo.commit("Base", {"ci/probe.py": PROBE_FILE, "regtrack.toml": CONFIG, "lib/a.txt": "0\n"})]
    shas.append(repo.commit("One", {"lib/a.txt": "1\n"}))
    shas.append(repo.commit("Trouble", {"lib/sigbus": "x\n"}))
    shas.append(repo.commit("Gone", {"lib/sigbus": None}))
    shas.append(repo.commit("Two", {"lib/a.txt": "2\n"}))
    return repo, shas


def scan(repo: GitRepo, span: str, probe: str) -> dict[str, Any]:
    result = regtrack("scan", span, "--probe", probe, "--json", cwd=repo.path)
    assert result.exit_code in (0, 1), result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_a_crash_that_does_not_come_back_is_flaky_not_a_regression(repo: tuple[GitRepo, list[str]]) -> None:
    git, shas = repo
    found = scan(git, f"{shas[0]}..{shas[-1]}", "dies_once")
    assert found["transitions"] == []
    assert [(s["kind"], s["first"], s["last"]) for s in found["stretches"]] == [("flaky", shas[2], shas[2])]
    assert found["executions"] == 3, "the base (the others read the same files) once, the crashed tree twice"


def test_a_crash_that_comes_back_stands_after_one_rerun(repo: tuple[GitRepo, list[str]], tmp_path: Path) -> None:
    home = tmp_path / "home"
    git, shas = repo
    found = scan(git, f"{shas[0]}..{shas[-1]}", "dies_always")
    assert [(t["kind"], t["sha"]) for t in found["transitions"]] == [("regression", shas[2]), ("fix", shas[3])]
    assert found["executions"] == 3
    with sqlite3.connect(home / "data" / "regtrack.db") as db:
        signatures = db.execute(
            "SELECT runs.attempt, runs.signature FROM runs JOIN commits ON runs.commit_id = commits.id "
            "WHERE commits.sha = ? ORDER BY runs.attempt",
            (shas[2],),
        ).fetchall()
    assert signatures == [(1, "worker died (SIGBUS)"), (2, "worker died (SIGBUS)")]
