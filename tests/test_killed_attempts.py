"""A command killed while a case runs leaves a claim behind and an attempt number used but never
stored. The next command must neither wait on the dead process's claim nor skip its number: the
stored attempts of a tree stay numbered 1, 2, 3 ... Real git, real SQLite, the real CLI killed
with SIGKILL mid-probe."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from gitrepo import GitRepo

GOOD = "exit 0\n"
BAD_AND_HELD = """count=$(( $(cat "$PROBE_COUNT" 2>/dev/null || echo 0) + 1 ))
echo "$count" > "$PROBE_COUNT"
if [ "$count" = "$PROBE_HOLD_AT" ]; then
  touch "$PROBE_STARTED"
  waited=0
  while [ -e "$PROBE_HOLD" ] && [ "$waited" -lt 600 ]; do sleep 0.1; waited=$((waited + 1)); done
fi
exit 1
"""
"""Fails; its PROBE_HOLD_AT-th execution says so in PROBE_STARTED and waits while PROBE_HOLD exists."""


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    """good, good, bad: a scan of the last two finds a transition and reruns the bad side."""
    repo = GitRepo(tmp_path / "repo")
    repo.commit("Initial import", {"check.sh": GOOD})
    repo.commit("Tidy", {"check.sh": "# tidy\n" + GOOD})
    repo.commit("Break it", {"check.sh": BAD_AND_HELD})
    return repo


def scan(repo: GitRepo, home: Path, hooks: dict[str, str]) -> subprocess.Popen[str]:
    env = {name: value for name, value in os.environ.items() if name != "REGTRACK_DB_URL"}
    command = [
        sys.executable,
        "-m",
        "tracker.cli",
        "scan",
        "HEAD~2..HEAD",
        "--command",
        "sh check.sh",
        "--confirm",
        "2",
        "--json",
    ]
    return subprocess.Popen(
        command,
        cwd=repo.path,
        env={**env, **hooks, "REGTRACK_HOME": str(home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(path: Path, process: subprocess.Popen[str], within_s: float = 120) -> None:
    deadline = time.monotonic() + within_s
    while not path.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def attempts_of_the_bad_tree(home: Path) -> list[int]:
    with sqlite3.connect(home / "data" / "regtrack.db") as connection:
        rows = connection.execute("SELECT attempt FROM runs WHERE outcome = 'fail' ORDER BY attempt").fetchall()
    return [attempt for (attempt,) in rows]


def claims(home: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(home / "data" / "regtrack.db") as connection:
        return connection.execute("SELECT attempt, owner FROM claims").fetchall()


def test_a_scan_killed_mid_probe_leaves_no_claim_and_no_gap_in_the_attempts(repo: GitRepo, tmp_path: Path) -> None:
    home, started, hold = tmp_path / "home", tmp_path / "started", tmp_path / "hold"
    hooks = {
        "PROBE_COUNT": str(tmp_path / "count"),
        "PROBE_HOLD_AT": "3",
        "PROBE_STARTED": str(started),
        "PROBE_HOLD": str(hold),
    }
    hold.touch()
    killed = scan(repo, home, hooks)
    try:
        wait_for(started, killed)  # the bad commit's third execution: its second confirming rerun
        killed.send_signal(signal.SIGKILL)
        killed.communicate(timeout=60)
    finally:
        hold.unlink()
    assert killed.returncode == -signal.SIGKILL
    assert attempts_of_the_bad_tree(home) == [1, 2]
    assert [attempt for attempt, _ in claims(home)] == [3]

    again = scan(repo, home, hooks)
    stdout, stderr = again.communicate(timeout=300)
    assert again.returncode == 1, stdout + stderr
    assert attempts_of_the_bad_tree(home) == [1, 2, 3]
    assert claims(home) == []
