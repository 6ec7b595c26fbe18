"""A shallow clone says where its history is cut: a scan that reaches the cut warns, a range that
starts beyond it is refused with the way to fetch more. Real clones (``git clone --depth``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from gitrepo import GitRepo, git, git_env

from tracker.core.errors import UsageError
from tracker.targets.revisions import Repo

ROOT = Path(__file__).resolve().parent.parent
FETCH_MORE = "fetch more history with `git fetch --deepen N` or `git fetch --unshallow`"


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> GitRepo:
    """main: eight commits c0..c7; branch ``old`` at c3."""
    repo = GitRepo(tmp_path_factory.mktemp("origin") / "origin")
    for i in range(8):
        repo.commit(f"c{i}", {"backend/a.py": f"a = {i}\n"})
    repo.git("branch", "old", "HEAD~4")
    return repo


def clone(origin: GitRepo, where: Path, *options: str) -> Path:
    git(where.parent, "clone", "--quiet", "--depth", "3", *options, f"file://{origin.path}", str(where))
    return where


@pytest.fixture(scope="module")
def shallow(origin: GitRepo, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return clone(origin, tmp_path_factory.mktemp("shallow") / "clone")


def sha(repo: Path, rev: str) -> str:
    return git(repo, "rev-parse", rev).strip()


def test_a_full_clone_has_no_cut(origin: GitRepo) -> None:
    assert Repo(origin.path).shallow_cut() == ()


def test_the_cut_is_the_oldest_commit_fetched(shallow: Path) -> None:
    repo = Repo(shallow)
    cut = sha(shallow, "HEAD~2")
    assert repo.shallow_cut() == (cut,)
    assert repo.history_cut(repo.line("HEAD")) == [cut]
    assert repo.history_cut(repo.line("HEAD~1..HEAD")) == []


@pytest.mark.parametrize("rev", ["HEAD~5", "0123456789abcdef0123456789abcdef01234567"])
def test_a_revision_beyond_the_cut_is_refused_with_the_way_to_fetch_it(shallow: Path, rev: str) -> None:
    cut = sha(shallow, "HEAD~2")
    with pytest.raises(UsageError) as caught:
        Repo(shallow).first_parent_range(rev, "HEAD")
    assert str(caught.value) == (
        f"unknown revision {rev!r} in {shallow}: "
        f"this shallow clone's history is cut at {cut}, so it may be older; {FETCH_MORE}"
    )


def test_a_good_commit_joined_to_bad_only_beyond_the_cut_is_refused_with_the_way_to_fetch_it(
    origin: GitRepo, tmp_path: Path
) -> None:
    both = clone(origin, tmp_path / "both", "--no-single-branch")
    good, bad = sha(both, "origin/old"), sha(both, "origin/main")
    cuts = sorted(Repo(both).shallow_cut())
    assert len(cuts) == 2 and good not in cuts
    with pytest.raises(UsageError) as caught:
        Repo(both).first_parent_range(good, bad)
    assert str(caught.value) == (
        f"good {good} is not an ancestor of bad {bad} here: "
        f"this shallow clone's history is cut at {', '.join(cuts)}; {FETCH_MORE}"
    )


def regtrack(config: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**git_env(), "PYTHONPATH": str(ROOT), "REGTRACK_HOME": str(home)}
    env.pop("REGTRACK_DB_URL", None)
    command = [sys.executable, "-m", "tracker.cli", *args]
    return subprocess.run(command, cwd=config, env=env, capture_output=True, text=True, check=False, timeout=120)


@pytest.fixture
def config(shallow: Path, tmp_path: Path) -> Path:
    where = tmp_path / "config"
    where.mkdir()
    probes = '[targets.t.probes.passes]\ncommand = ["sh", "-c", "exit 0"]\n'
    (where / "regtrack.toml").write_text(f'[targets.t]\nrepo = {str(shallow)!r}\npaths = ["backend"]\n{probes}')
    return where


def test_a_scan_reaching_the_cut_warns_in_one_line_naming_it(config: Path, shallow: Path, tmp_path: Path) -> None:
    cut = sha(shallow, "HEAD~2")
    whole = regtrack(config, tmp_path / "home", "scan", "HEAD")
    assert whole.returncode == 0, whole.stderr
    warnings = [line for line in whole.stderr.splitlines() if "warning" in line]
    assert warnings == [
        f"regtrack: warning: this shallow clone's history is cut at {cut}: the commits before it are "
        f"missing, so the scan starts there; {FETCH_MORE}"
    ]
    inside = regtrack(config, tmp_path / "home", "scan", "HEAD~1..HEAD")
    assert inside.returncode == 0 and "warning" not in inside.stderr, inside.stderr


def test_a_scan_or_bisect_starting_beyond_the_cut_exits_2(config: Path, shallow: Path, tmp_path: Path) -> None:
    for args in (["scan", "HEAD~5..HEAD"], ["bisect", "--good", "HEAD~5", "--bad", "HEAD"]):
        result = regtrack(config, tmp_path / "home", *args)
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith("regtrack: error: unknown revision 'HEAD~5'") and FETCH_MORE in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
