"""Where regtrack keeps its data, as a user's machine may have it: a home that cannot be written,
a database URL whose directory does not exist. Each is one line on stderr and exit 2, through the
real CLI in its own process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from gitrepo import GitRepo


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    repo = GitRepo(tmp_path / "repo")
    repo.commit("Initial import", {"check.sh": "exit 0\n"})
    return repo


@pytest.fixture
def checkout(repo: GitRepo) -> Path:
    return repo.path


def regtrack(checkout: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    inherited = {name: value for name, value in os.environ.items() if name not in ("REGTRACK_DB_URL", "REGTRACK_HOME")}
    return subprocess.run(
        [sys.executable, "-m", "tracker.cli", *args],
        cwd=checkout,
        env={**inherited, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("regtrack: error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


RUN = ("run", "--command", "sh check.sh", "HEAD")


# -- a database URL whose directory is missing ---------------------------------------------------


def test_a_sqlite_url_in_a_missing_directory_is_refused_and_creates_nothing(checkout: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent" / "dir"
    for command in (RUN, ("history",), ("db", "upgrade")):
        result = regtrack(
            checkout, *command, REGTRACK_HOME=str(tmp_path / "home"), REGTRACK_DB_URL=f"sqlite:///{missing / 'x.db'}"
        )
        one_line_error(result, f"directory {missing} of database {missing / 'x.db'} does not exist", "create it")
    assert not (tmp_path / "nonexistent").exists()


def test_the_default_data_directory_is_created(checkout: Path, tmp_path: Path) -> None:
    home = tmp_path / "new" / "home"
    assert regtrack(checkout, *RUN, REGTRACK_HOME=str(home)).returncode == 0
    assert (home / "data" / "regtrack.db").is_file()


# -- a home that cannot be written ---------------------------------------------------------------


@contextmanager
def unwritable(tree: Path) -> Iterator[None]:
    """``tree`` and everything in it unwritable, as on a read-only mount: by its permissions, or for
    root, whom permissions do not stop, by the immutable attribute (``chattr +i``)."""
    paths = [tree, *tree.rglob("*")]
    if os.geteuid() != 0:
        modes = {path: path.stat().st_mode for path in paths}
        for path in paths:
            path.chmod(0o555 if path.is_dir() else 0o444)
        try:
            yield
        finally:
            for path in reversed(paths):
                path.chmod(modes[path])
        return
    made = subprocess.run(["chattr", "-R", "+i", str(tree)], capture_output=True, text=True)
    if made.returncode != 0:
        subprocess.run(["chattr", "-R", "-i", str(tree)], capture_output=True)
        pytest.skip(f"cannot make {tree} unwritable for root: {made.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-R", "-i", str(tree)], check=True)


@pytest.fixture
def used_home(checkout: Path, tmp_path: Path) -> Path:
    """A home a command has used: a database, a snapshot, worker logs, the stamp of the last gc
    (two hours old, so the next command cleans the cache again)."""
    home = tmp_path / "home"
    assert regtrack(checkout, *RUN, REGTRACK_HOME=str(home)).returncode == 0
    stamp = home / "cache" / "snapshots" / ".gc-stamp"
    assert stamp.is_file() and (home / "data" / "regtrack.db").is_file()
    two_hours_ago = time.time() - 7200
    os.utime(stamp, (two_hours_ago, two_hours_ago))
    return home


def test_gc_of_an_unwritable_cache_says_so(checkout: Path, used_home: Path) -> None:
    with unwritable(used_home):
        result = regtrack(checkout, "gc", "--max-age", "0s", REGTRACK_HOME=str(used_home))
    one_line_error(
        result, f"cannot clean the snapshot cache {used_home / 'cache' / 'snapshots'}", "writable", "REGTRACK_HOME"
    )


@pytest.mark.parametrize(
    "command", [RUN, ("history",), ("show", "HEAD"), ("regressions",), ("scan", "HEAD~0..HEAD")], ids=" ".join
)
def test_a_command_with_an_unwritable_database_directory_says_so(
    checkout: Path, used_home: Path, command: tuple[str, ...]
) -> None:
    data = used_home / "data"
    with unwritable(used_home):
        result = regtrack(checkout, *command, REGTRACK_HOME=str(used_home))
    line = one_line_error(
        result, f"database {data / 'regtrack.db'} cannot be opened: its directory {data} cannot be written"
    )
    assert "REGTRACK_HOME" in line and "REGTRACK_DB_URL" in line
    assert "restore it" not in line and "damaged" not in line


def test_a_query_with_its_database_elsewhere_leaves_an_unwritable_cache_alone(
    checkout: Path, used_home: Path, tmp_path: Path
) -> None:
    """The cache is cleaned as a command finishes, at most hourly; one it cannot write to is no
    reason for the command to fail."""
    elsewhere = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    assert regtrack(checkout, *RUN, REGTRACK_HOME=str(tmp_path / "other"), REGTRACK_DB_URL=elsewhere).returncode == 0
    with unwritable(used_home):
        result = regtrack(checkout, "history", "--json", REGTRACK_HOME=str(used_home), REGTRACK_DB_URL=elsewhere)
    assert result.returncode == 0, result.stderr
    assert [row["outcome"] for row in json.loads(result.stdout)["runs"]] == ["pass"]


def test_a_run_that_needs_a_snapshot_in_an_unwritable_cache_says_so(
    repo: GitRepo, used_home: Path, tmp_path: Path
) -> None:
    checkout = repo.path
    with unwritable(used_home):
        result = regtrack(
            checkout, *RUN, REGTRACK_HOME=str(used_home), REGTRACK_DB_URL=f"sqlite:///{tmp_path / 'elsewhere.db'}"
        )
    one_line_error(result, str(used_home / "cache" / "snapshots"))
