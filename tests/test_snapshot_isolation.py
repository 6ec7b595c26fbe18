"""A case never sees what another case left in its snapshot: files and directories it created or
removed count as modifications, as edits do, and the next case gets a rebuilt snapshot."""

from __future__ import annotations

import builtins
import io
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from gitrepo import GitRepo, git_env

from tracker.targets.revisions import Repo
from tracker.targets.setup import Setup
from tracker.targets.snapshots import SnapshotCache, manifest_path, modified_file

ROOT = Path(__file__).resolve().parent.parent
BACKEND = ("backend",)
PLANTING_PROBE = '''\
from probes import Case, Probe, ProbeResult
from tracker.core.verdicts import Outcome


def plant(ctx, params):
    """Fails when an earlier case left its file; then leaves one."""
    planted = ctx.root / "planted"
    if planted.exists():
        return ProbeResult(Outcome.FAIL, signature="an earlier case's file is here")
    planted.write_text("left by a case\\n")
    return ProbeResult.passed()


PLANTING = Probe("planting", 1, "sees no file of another case", (Case("first", {}), Case("second", {})), plant)
'''


def regtrack(repo: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**git_env(), "PYTHONPATH": str(ROOT), "REGTRACK_HOME": str(home)}
    env.pop("REGTRACK_DB_URL", None)
    command = [sys.executable, "-m", "tracker.cli", *args]
    return subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, check=False, timeout=120)


def test_a_file_one_command_creates_is_not_seen_by_the_next(tmp_path: Path) -> None:
    work = GitRepo(tmp_path / "work")
    work.commit("one", {"a.txt": "a\n"})
    home = tmp_path / "home"
    planted = regtrack(work.path, home, "run", "--command", "sh -c 'touch planted'", "HEAD")
    assert planted.returncode == 0, planted.stderr
    clean = regtrack(work.path, home, "run", "--command", "sh -c 'test ! -e planted'", "HEAD")
    assert clean.returncode == 0, clean.stdout + clean.stderr


def test_a_case_does_not_see_the_file_an_earlier_case_of_its_probe_left(tmp_path: Path) -> None:
    work = GitRepo(tmp_path / "work")
    work.commit("one", {"backend/a.py": "a = 1\n", "ci/planting.py": PLANTING_PROBE})
    config = tmp_path / "config"
    config.mkdir()
    probes = '[targets.t.probes.planting]\nmodule = "ci/planting.py:PLANTING"\n'
    (config / "regtrack.toml").write_text(f'[targets.t]\nrepo = {str(work.path)!r}\npaths = ["backend"]\n{probes}')
    result = regtrack(config, tmp_path / "home", "run", "--json", "HEAD")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture
def work(tmp_path: Path) -> GitRepo:
    """backend/ holding a file, a subdirectory and an empty directory (a submodule's gitlink)."""
    repo = GitRepo(tmp_path / "work")
    first = repo.commit("one", {"backend/a.py": "a = 1\n", "backend/deep/b.py": "b = 1\n"})
    repo.git("update-index", "--add", "--cacheinfo", f"160000,{first},backend/sub")
    repo.git("commit", "--quiet", "-m", "two")
    return repo


@pytest.fixture
def snapshot(work: GitRepo, tmp_path: Path) -> Path:
    made = SnapshotCache(tmp_path / "cache").materialise(Repo(work.path), "HEAD", BACKEND)
    assert sorted(os.listdir(made / "backend")) == ["a.py", "deep", "sub"]
    return made


def opened(directory: Path, change: Callable[[Path], None]) -> None:
    """Apply ``change`` to a read-only directory as its owner would (root ignores the bits anyway)."""
    mode = stat.S_IMODE(directory.stat().st_mode)
    directory.chmod(mode | stat.S_IWUSR)
    try:
        change(directory)
    finally:
        directory.chmod(mode)


CHANGES: dict[str, tuple[str, Callable[[Path], None], str]] = {
    "a file at the top": ("", lambda d: (d / "planted").write_text("x\n"), "planted"),
    "a file in a subdirectory": ("backend/deep", lambda d: (d / "c.py").write_text("c = 1\n"), "backend/deep/c.py"),
    "a cache directory": ("backend", lambda d: (d / "__pycache__").mkdir(), "backend/__pycache__"),
    "a file in an empty directory": ("backend/sub", lambda d: (d / "x").write_text("x\n"), "backend/sub/x"),
    "a removed empty directory": ("backend", lambda d: (d / "sub").rmdir(), "backend/sub"),
    "a renamed file": ("backend", lambda d: (d / "a.py").rename(d / "z.py"), "backend/a.py"),
    "a removed directory": ("backend", lambda d: shutil.rmtree(d / "deep"), "backend/deep"),
}


@pytest.mark.parametrize("name", CHANGES)
def test_new_and_removed_files_and_directories_count_as_modifications(snapshot: Path, name: str) -> None:
    where, change, found = CHANGES[name]
    assert modified_file(snapshot) is None
    opened(snapshot / where, change)
    assert modified_file(snapshot) == found


def test_a_snapshot_with_a_new_file_is_rebuilt_without_it_sharing_its_intact_files(
    snapshot: Path, work: GitRepo
) -> None:
    """A command that leaves caches (``python -m pytest``) makes every use rebuild: that costs links, not a checkout."""
    intact = (snapshot / "backend" / "deep" / "b.py").stat().st_ino
    opened(snapshot / "backend", lambda d: (d / "planted").write_text("x\n"))
    again = SnapshotCache(snapshot.parent).materialise(Repo(work.path), "HEAD", BACKEND)
    assert again == snapshot and modified_file(again) is None
    assert not (again / "backend" / "planted").exists()
    assert (again / "backend" / "deep" / "b.py").stat().st_ino == intact


def test_a_file_added_beside_what_a_setup_built_counts_too(work: GitRepo, tmp_path: Path) -> None:
    setup = Setup(("sh", "-c", "mkdir backend/out && echo built > backend/out/lib.so"))
    built = SnapshotCache(tmp_path / "cache").materialise(Repo(work.path), "HEAD", BACKEND, setup)
    assert modified_file(built) is None
    opened(built / "backend" / "out", lambda d: (d / "stray.o").write_text("x\n"))
    assert modified_file(built) == "backend/out/stray.o"


def test_checking_a_snapshot_of_five_thousand_files_reads_only_its_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One lstat per file and one listing per directory, no hashing: no file but the manifest is opened."""
    work = GitRepo(tmp_path / "work")
    work.commit("many", {f"backend/d{d:02}/f{f:03}.py": f"x = {f}\n" for d in range(50) for f in range(100)})
    snapshot = SnapshotCache(tmp_path / "cache").materialise(Repo(work.path), "HEAD", BACKEND)
    opened_files: list[str] = []
    real_open = builtins.open

    def recording_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        opened_files.append(str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", recording_open)
    monkeypatch.setattr(io, "open", recording_open)  # what pathlib opens files with
    assert modified_file(snapshot) is None
    assert opened_files == [str(manifest_path(snapshot))]
