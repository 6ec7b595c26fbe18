"""Snapshots of real repositories: contents, sharing by tree, atomicity, gc, and the user's checkout untouched."""

from __future__ import annotations

import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path

import pytest
from demo_histories import DemoHistories
from gitrepo import GitRepo

from tracker.core.errors import UsageError
from tracker.demo.bugs import read_tree
from tracker.demo.history import backend_root
from tracker.targets.revisions import Repo
from tracker.targets.snapshots import (
    AUTO_GC_EVERY_S,
    DEFAULT_MAX_AGE_S,
    DEFAULT_MAX_BYTES,
    GC_STAMP,
    LOCK_NAME,
    MANIFEST_SUFFIX,
    TEMP_PREFIX,
    GcReport,
    SnapshotCache,
)

BACKEND = ("backend",)


@pytest.fixture
def work(tmp_path: Path) -> GitRepo:
    repo = GitRepo(tmp_path / "work")
    repo.commit("one", {"backend/__init__.py": "", "backend/a.py": "a = 1\n", "docs/x.md": "x\n"})
    repo.write({"backend/a.py": "a = 2\n", "backend/run.sh": "#!/bin/sh\n"})
    os.chmod(repo.path / "backend" / "run.sh", 0o755)
    repo.commit("two")
    repo.commit("three", {"docs/x.md": "y\n"})
    return repo


def files_under(root: Path) -> dict[str, str]:
    return {str(path.relative_to(root)): path.read_text() for path in sorted(root.rglob("*")) if path.is_file()}


def checkout_state(work: GitRepo) -> tuple[object, ...]:
    """The index first, then git's view without its optional index refresh, then the files themselves."""
    index = work.path / ".git" / "index"
    return (
        index.read_bytes(),
        index.stat().st_mtime_ns,
        work.git("--no-optional-locks", "status", "--porcelain", "--untracked-files=all"),
        work.head(),
        work.git("symbolic-ref", "HEAD"),
        files_under(work.path / "backend"),
        (work.path / ".git" / "HEAD").read_bytes(),
    )


def leftovers(cache: SnapshotCache) -> list[str]:
    return [entry.name for entry in cache.root.iterdir() if entry.name.startswith(TEMP_PREFIX)]


def test_materialise_holds_the_target_paths_of_that_commit(work: GitRepo, tmp_path: Path) -> None:
    cache = SnapshotCache(tmp_path / "cache")
    repo = Repo(work.path)
    first = cache.materialise(repo, "HEAD~2", BACKEND)
    assert first.parent == cache.root
    assert files_under(first) == {"backend/__init__.py": "", "backend/a.py": "a = 1\n"}
    latest = cache.materialise(repo, "HEAD", BACKEND)
    assert files_under(latest) == {
        "backend/__init__.py": "",
        "backend/a.py": "a = 2\n",
        "backend/run.sh": "#!/bin/sh\n",
    }
    assert os.access(latest / "backend" / "run.sh", os.X_OK)
    both = cache.materialise(repo, "HEAD", ("docs", "backend"))
    assert set(files_under(both)) == {"backend/__init__.py", "backend/a.py", "backend/run.sh", "docs/x.md"}
    assert len({first, latest, both}) == 3
    assert leftovers(cache) == []


def test_commits_with_the_same_target_tree_share_a_snapshot(work: GitRepo, tmp_path: Path) -> None:
    cache = SnapshotCache(tmp_path / "cache")
    repo = Repo(work.path)
    older = cache.materialise(repo, "HEAD~1", BACKEND)
    inode = older.stat().st_ino
    newer = cache.materialise(repo, "HEAD", BACKEND)
    assert newer == older and newer.stat().st_ino == inode
    assert older.name.startswith(repo.tree_hash("HEAD", BACKEND))
    assert len(cache.snapshots()) == 1


def test_the_same_tree_under_other_paths_is_another_snapshot(tmp_path: Path) -> None:
    work = GitRepo(tmp_path / "work")
    work.commit("twins", {"backend/a.py": "same\n", "vendor/a.py": "same\n"})
    repo = Repo(work.path)
    assert repo.tree_hash("HEAD", ("backend",)) == repo.tree_hash("HEAD", ("vendor",))
    cache = SnapshotCache(tmp_path / "cache")
    backend, vendor = cache.materialise(repo, "HEAD", ("backend",)), cache.materialise(repo, "HEAD", ("vendor",))
    assert backend != vendor
    assert files_under(backend) == {"backend/a.py": "same\n"}
    assert files_under(vendor) == {"vendor/a.py": "same\n"}


def test_missing_paths_are_left_out(work: GitRepo, tmp_path: Path) -> None:
    cache = SnapshotCache(tmp_path / "cache")
    repo = Repo(work.path)
    partial = cache.materialise(repo, "HEAD", ("backend", "src"))
    assert set(files_under(partial)) == {"backend/__init__.py", "backend/a.py", "backend/run.sh"}
    nothing = cache.materialise(repo, "HEAD", ("src",))
    assert nothing.is_dir() and list(nothing.iterdir()) == []


def test_whole_tree_single_file_and_nested_targets(work: GitRepo, tmp_path: Path) -> None:
    cache = SnapshotCache(tmp_path / "cache")
    repo = Repo(work.path)
    everything = {"backend/__init__.py", "backend/a.py", "backend/run.sh", "docs/x.md"}
    assert set(files_under(cache.materialise(repo, "HEAD", (".",)))) == everything
    assert files_under(cache.materialise(repo, "HEAD", ("docs/x.md",))) == {"docs/x.md": "y\n"}
    nested = cache.materialise(repo, "HEAD", ("backend", "backend/a.py", "./docs/"))
    assert set(files_under(nested)) == everything


def test_unknown_revision(work: GitRepo, tmp_path: Path) -> None:
    cache = SnapshotCache(tmp_path / "cache")
    with pytest.raises(UsageError, match="unknown revision 'nope'"):
        cache.materialise(Repo(work.path), "nope", BACKEND)
    assert cache.snapshots() == []


def test_the_users_checkout_is_untouched(work: GitRepo, tmp_path: Path) -> None:
    work.write({"backend/a.py": "a = 'uncommitted'\n", "backend/new.py": "untracked\n"})
    work.git("add", "backend/new.py")
    work.write({"backend/new.py": "untracked, then changed\n"})
    before = checkout_state(work)
    cache = SnapshotCache(tmp_path / "cache")
    repo = Repo(work.path)
    for rev in ("HEAD~2", "HEAD~1", "HEAD", "HEAD~2"):
        cache.materialise(repo, rev, BACKEND)
    cache.materialise(repo, "HEAD~2", ("backend", "docs"))
    after = checkout_state(work)
    assert after == before
    assert set(before[2].splitlines()) == {" M backend/a.py", "AM backend/new.py"}


def test_concurrent_materialise_of_one_tree(work: GitRepo, tmp_path: Path) -> None:
    cache = SnapshotCache(tmp_path / "cache")
    start = threading.Barrier(8)

    def build(_: int) -> Path:
        repo = Repo(work.path)
        start.wait()
        return SnapshotCache(cache.root).materialise(repo, "HEAD", BACKEND)

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(build, range(8)))
    assert len(set(results)) == 1
    assert files_under(results[0]) == {
        "backend/__init__.py": "",
        "backend/a.py": "a = 2\n",
        "backend/run.sh": "#!/bin/sh\n",
    }
    assert leftovers(cache) == []
    assert len(cache.snapshots()) == 1


def test_an_unsafe_archive_leaves_nothing_behind(tmp_path: Path) -> None:
    work = GitRepo(tmp_path / "work")
    work.commit("ok", {"backend/a.py": "a\n"})
    (work.path / "backend" / "passwd").symlink_to("/etc/passwd")
    work.commit("link out of the tree")
    cache = SnapshotCache(tmp_path / "cache")
    with pytest.raises(UsageError, match=r"cannot materialise [0-9a-f]{12} of .*'backend/passwd' is unsafe"):
        cache.materialise(Repo(work.path), "HEAD", BACKEND)
    assert [entry.name for entry in cache.root.iterdir()] == [LOCK_NAME]
    assert files_under(cache.materialise(Repo(work.path), "HEAD~1", BACKEND)) == {"backend/a.py": "a\n"}


DAY = 24 * 3600.0


def used_ago(snapshot: Path, seconds: float) -> None:
    stamp = time.time() - seconds
    os.utime(snapshot, (stamp, stamp))


def history(tmp_path: Path, count: int) -> tuple[SnapshotCache, Repo, list[Path]]:
    """A snapshot of each of ``count`` commits, oldest first, each 6 bytes ("a = N\\n")."""
    work = GitRepo(tmp_path / "work")
    repo = Repo(work.path)
    cache = SnapshotCache(tmp_path / "cache")
    snapshots = []
    for number in range(count):
        work.commit(f"c{number}", {"backend/a.py": f"a = {number}\n"})
        snapshots.append(cache.materialise(repo, "HEAD", BACKEND))
    return cache, repo, snapshots


def test_gc_removes_the_least_recently_used_beyond_max_bytes(tmp_path: Path) -> None:
    cache, repo, snapshots = history(tmp_path, 5)
    for age, snapshot in enumerate(reversed(snapshots)):
        used_ago(snapshot, 100 * (age + 1))
    assert cache.materialise(repo, "HEAD~4", BACKEND) == snapshots[0]
    stale = cache.root / f"{TEMP_PREFIX}crashed"
    stale.mkdir()
    os.utime(stale, (0, 0))
    fresh = cache.root / f"{TEMP_PREFIX}building"
    fresh.mkdir()
    report = cache.gc(max_bytes=12, max_age_s=None, min_idle_s=0)
    assert report == GcReport(
        removed_snapshots=3, freed_bytes=18, removed_temporaries=1, kept_snapshots=2, kept_bytes=12
    )
    assert cache.snapshots() == [snapshots[0], snapshots[4]]
    assert sorted(path.name for path in cache.root.glob(f"*{MANIFEST_SUFFIX}")) == sorted(
        f"{snapshot.name}{MANIFEST_SUFFIX}" for snapshot in (snapshots[0], snapshots[4])
    )
    assert not stale.exists() and fresh.exists()
    assert cache.gc(max_bytes=12, max_age_s=None, min_idle_s=0).removed_snapshots == 0
    assert cache.gc(max_bytes=0, max_age_s=None, min_idle_s=0).removed_snapshots == 2
    assert cache.snapshots() == [] and list(cache.root.glob(f"*{MANIFEST_SUFFIX}")) == []


def test_gc_removes_snapshots_unused_beyond_max_age(tmp_path: Path) -> None:
    cache, _, snapshots = history(tmp_path, 5)
    for age, snapshot in enumerate(reversed(snapshots)):
        used_ago(snapshot, (age + 1) * DAY)
    report = cache.gc(max_bytes=None, max_age_s=2.5 * DAY, min_idle_s=0)
    assert (report.removed_snapshots, report.kept_snapshots) == (3, 2)
    assert cache.snapshots() == [snapshots[4], snapshots[3]]
    assert cache.gc(max_bytes=None, max_age_s=None, min_idle_s=0) == GcReport(kept_snapshots=2, kept_bytes=12)


def test_gc_never_removes_a_snapshot_used_within_min_idle(tmp_path: Path) -> None:
    cache, _, snapshots = history(tmp_path, 4)
    for age, snapshot in enumerate(reversed(snapshots)):
        used_ago(snapshot, (age + 1) * 1000)
    report = cache.gc(max_bytes=0, max_age_s=0, min_idle_s=2500)
    assert (report.removed_snapshots, report.kept_snapshots, report.kept_bytes) == (2, 2, 12)
    assert cache.snapshots() == [snapshots[3], snapshots[2]]
    assert cache.gc(max_bytes=0, max_age_s=0).removed_snapshots == 0


def test_gc_removes_manifests_without_a_snapshot(tmp_path: Path) -> None:
    cache, _, snapshots = history(tmp_path, 1)
    orphan = cache.root / f"{'0' * 40}-{'1' * 12}{MANIFEST_SUFFIX}"
    orphan.write_text("{}")
    cache.gc(max_bytes=None, max_age_s=None)
    assert not orphan.exists() and (cache.root / f"{snapshots[0].name}{MANIFEST_SUFFIX}").exists()


def test_auto_gc_runs_with_the_defaults_at_most_hourly(tmp_path: Path) -> None:
    cache, _, snapshots = history(tmp_path, 2)
    used_ago(snapshots[0], DEFAULT_MAX_AGE_S + DAY)
    assert cache.auto_gc() == GcReport(removed_snapshots=1, freed_bytes=6, kept_snapshots=1, kept_bytes=6)
    used_ago(snapshots[1], DEFAULT_MAX_AGE_S + DAY)
    assert cache.auto_gc() is None
    assert cache.snapshots() == [snapshots[1]]
    stamp = time.time() - AUTO_GC_EVERY_S - 60
    os.utime(cache.root / GC_STAMP, (stamp, stamp))
    assert SnapshotCache(cache.root).auto_gc() == GcReport(removed_snapshots=1, freed_bytes=6)
    assert DEFAULT_MAX_BYTES == 10 * 1024**3 and DEFAULT_MAX_AGE_S == 30 * DAY


def test_gc_report_prints_and_serialises() -> None:
    report = GcReport(removed_snapshots=3, freed_bytes=3 << 20, removed_temporaries=1, kept_snapshots=2, kept_bytes=0)
    assert str(report) == "removed 3 snapshots (3.0 MiB) and 1 temporaries; kept 2 snapshots (0.0 MiB)"
    assert json.loads(json.dumps(asdict(report)))["freed_bytes"] == 3 << 20


def test_gc_of_a_missing_cache(tmp_path: Path) -> None:
    cache = SnapshotCache(tmp_path / "none")
    assert cache.gc(max_bytes=0, max_age_s=0) == GcReport()
    assert cache.auto_gc() is None
    assert not cache.root.exists()


def test_default_root_follows_regtrack_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    assert SnapshotCache().root == tmp_path / "home" / "cache" / "snapshots"


def test_uncreatable_cache_root(work: GitRepo, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(UsageError, match="cannot create the snapshot cache .*a-file/cache: .*set REGTRACK_HOME"):
        SnapshotCache(blocker / "cache").materialise(Repo(work.path), "HEAD", BACKEND)


def test_demo_head_snapshot_is_the_backend_package(tmp_path: Path, demo_histories: DemoHistories) -> None:
    repo, manifest = demo_histories.shared(60)
    cache = SnapshotCache(tmp_path / "cache")
    snapshot = cache.materialise(Repo(repo), manifest.head, BACKEND)
    assert read_tree(snapshot) == read_tree(backend_root())


def test_a_snapshot_shares_the_unchanged_files_of_the_one_before(work: GitRepo, tmp_path: Path) -> None:
    cache = SnapshotCache(tmp_path / "cache")
    repo = Repo(work.path)
    first = cache.materialise(repo, "HEAD~2", BACKEND)
    second = cache.materialise(repo, "HEAD", BACKEND)
    unchanged, changed = "backend/__init__.py", "backend/a.py"
    assert os.path.samefile(first / unchanged, second / unchanged)
    assert not os.path.samefile(first / changed, second / changed)
    fresh = SnapshotCache(tmp_path / "fresh").materialise(repo, "HEAD", BACKEND)
    assert files_under(second) == files_under(fresh)
    modes = {path: (second / path).stat().st_mode for path in files_under(second)}
    assert modes == {path: (fresh / path).stat().st_mode for path in files_under(fresh)}


def test_a_file_edited_since_its_snapshot_was_sealed_is_not_shared(work: GitRepo, tmp_path: Path) -> None:
    cache = SnapshotCache(tmp_path / "cache")
    repo = Repo(work.path)
    first = cache.materialise(repo, "HEAD~2", BACKEND)
    edited = first / "backend" / "__init__.py"
    edited.chmod(0o644)
    edited.write_text("poisoned = True\n")
    second = cache.materialise(repo, "HEAD", BACKEND)
    assert (second / "backend" / "__init__.py").read_text() == ""
    assert not os.path.samefile(edited, second / "backend" / "__init__.py")
