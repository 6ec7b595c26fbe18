"""Revisions of real repositories: small ones built here and the demo history."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from itertools import pairwise
from pathlib import Path

import pytest
from demo_histories import DemoHistories
from gitrepo import START, GitRepo, git, git_env

from tracker.core.errors import UsageError
from tracker.demo.history import DemoManifest, build_demo_history
from tracker.targets.revisions import Repo, paths_key, pr_number, reverted_sha
from tracker.targets.snapshots import SnapshotCache


@pytest.fixture(scope="module")
def demo(demo_histories: DemoHistories) -> tuple[Repo, DemoManifest]:
    path, manifest = demo_histories.shared(60)
    return Repo(path), manifest


def first_parent_line(repo: Repo) -> list[str]:
    return git(repo.path, "rev-list", "--first-parent", "--reverse", "main").split()


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> GitRepo:
    """main: c0 - c1 - c2 - M - c4, with M merging side: s1 - s2 (forked at c1)."""
    repo = GitRepo(tmp_path_factory.mktemp("small"))
    repo.commit("c0", {"backend/a.py": "a = 0\n", "docs/readme.md": "hi\n"})
    repo.commit("c1 (#10)", {"backend/a.py": "a = 1\n"})
    repo.git("branch", "side")
    repo.commit("c2", {"docs/readme.md": "hello\n"})
    repo.checkout("side")
    repo.commit("s1", {"backend/b.py": "b = 1\n"})
    repo.commit("s2", {"docs/side.md": "side\n"})
    repo.checkout("main")
    repo.merge("side", "Merge pull request #12 from dev/side")
    repo.commit("c4", {"backend/a.py": "a = 4\n"})
    return repo


def sha_of(repo: GitRepo, rev: str) -> str:
    return repo.git("rev-parse", rev).strip()


def test_resolve(small: GitRepo) -> None:
    repo = Repo(small.path)
    head = small.head()
    assert repo.resolve("HEAD") == head
    assert repo.resolve("main") == head
    assert repo.resolve(head[:10]) == head
    assert repo.resolve("HEAD~1") == sha_of(small, "HEAD~1")
    assert repo.head_of("main") == head
    assert repo.head_of("side") == sha_of(small, "side")


@pytest.mark.parametrize("rev", ["nope", "HEAD~99", "--all", "HEAD^{tree}", "HEAD:backend/a.py", ""])
def test_unknown_revision(small: GitRepo, rev: str) -> None:
    with pytest.raises(UsageError) as caught:
        Repo(small.path).resolve(rev)
    assert str(caught.value) == f"unknown revision {rev!r} in {small.path}; check `git log`"


def commits_sharing_a_prefix(repo: GitRepo, batch: int = 256) -> list[str]:
    """Adds empty commits, a batch per ``git fast-import``, until two commit SHAs share their first
    4 hex digits (the shortest prefix git accepts); returns those commits."""
    by_prefix: dict[str, list[str]] = defaultdict(list)
    first = 0
    while True:
        stream = "".join(
            f"commit refs/heads/main\ncommitter T <t@example.com> {START + n} +0000\ndata <<END\ncommit {n}\nEND\n"
            + ("from refs/heads/main^0\n" if n == first > 0 else "")
            + "\n"
            for n in range(first, first + batch)
        )
        subprocess.run(
            ["git", "fast-import", "--quiet"], cwd=repo.path, env=git_env(), input=stream, text=True, check=True
        )
        for sha in git(repo.path, "rev-list", f"--max-count={batch}", "main").split():
            by_prefix[sha[:4]].append(sha)
        first += batch
        shared = [shas for shas in by_prefix.values() if len(shas) > 1]
        if shared:
            return shared[0]


def test_ambiguous_short_sha(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "repo")
    shas = commits_sharing_a_prefix(repo)
    prefix = shas[0][:4]
    assert set(git(repo.path, "rev-parse", f"--disambiguate={prefix}").split()) >= set(shas)
    for rev in (prefix, f"{prefix}~1"):
        with pytest.raises(UsageError) as caught:
            Repo(repo.path).resolve(rev)
        assert str(caught.value) == (
            f"ambiguous revision {rev!r} in {repo.path}: it matches several objects; give more hex digits"
        )
    assert Repo(repo.path).resolve(shas[1][:12]) == shas[1]
    with pytest.raises(UsageError, match="ambiguous revision"):
        Repo(repo.path).first_parent_range(prefix, "main")


def test_unknown_branch(small: GitRepo) -> None:
    with pytest.raises(UsageError, match=r"unknown branch 'trunk' in .*; check `git branch -a`"):
        Repo(small.path).head_of("trunk")


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"repository path .*/absent does not exist; pass --repo PATH"):
        Repo(tmp_path / "absent")


def test_not_a_repository(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"is not a git repository; pass --repo PATH"):
        Repo(tmp_path)


def test_bare_repository(tmp_path: Path) -> None:
    GitRepo(tmp_path / "bare.git", bare=True)
    with pytest.raises(UsageError, match=r"bare.git is a bare repository; clone it"):
        Repo(tmp_path / "bare.git")


def test_a_path_that_looks_like_it_holds_a_variable_is_taken_as_it_is(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "work $HOME")
    head = repo.commit("c0", {"a.py": "a = 0\n"})
    assert Repo(repo.path).path == repo.path
    assert Repo(repo.path).resolve("HEAD") == head


def test_a_subdirectory_opens_its_repository(small: GitRepo) -> None:
    assert Repo(small.path / "backend").path == small.path


def test_is_ancestor(small: GitRepo) -> None:
    repo = Repo(small.path)
    assert repo.is_ancestor("HEAD~2", "HEAD")
    assert repo.is_ancestor("side", "main")
    assert not repo.is_ancestor("main", "side")
    with pytest.raises(UsageError, match="unknown revision"):
        repo.is_ancestor("nope", "HEAD")


def test_first_parent_range(small: GitRepo) -> None:
    repo = Repo(small.path)
    line = first_parent_line(repo)
    assert repo.first_parent_range(line[0], "main") == line[1:]
    assert repo.first_parent_range(line[1][:8], line[2]) == [line[2]]
    assert repo.first_parent_range("HEAD~1", "HEAD") == [small.head()]


def test_good_equal_to_bad(small: GitRepo) -> None:
    head = small.head()
    with pytest.raises(UsageError, match=f"good and bad are the same commit {head}"):
        Repo(small.path).first_parent_range("main", head)


def test_good_not_an_ancestor_of_bad(small: GitRepo) -> None:
    repo = Repo(small.path)
    good, bad = repo.resolve("HEAD~2"), repo.resolve("side")
    with pytest.raises(UsageError) as caught:
        repo.first_parent_range("HEAD~2", "side")
    assert str(caught.value) == f"good {good} is not an ancestor of bad {bad}; pick a good commit from bad's history"
    head = small.head()
    with pytest.raises(UsageError, match=f"good {head} is not an ancestor of bad .*; swap good and bad"):
        repo.first_parent_range("main", "HEAD~1")


def test_good_on_a_merged_branch(small: GitRepo) -> None:
    repo = Repo(small.path)
    merge = sha_of(small, "HEAD~1")
    with pytest.raises(UsageError, match=f"is not on the first-parent line of bad .* merge {merge}"):
        repo.first_parent_range("side", "main")


def test_good_deep_in_a_merged_branch_names_the_merge_it_came_in_through(tmp_path: Path) -> None:
    """main: c0 - c1 - c2 - M - c3 - c4, M merging side: s1 - s2 - s3 (forked at c1)."""
    work = GitRepo(tmp_path / "work")
    work.commit("c0", {"a.py": "0\n"})
    work.commit("c1", {"a.py": "1\n"})
    work.git("branch", "side")
    work.commit("c2", {"a.py": "2\n"})
    work.checkout("side")
    side = [work.commit(f"s{i}", {f"s{i}.py": f"{i}\n"}) for i in (1, 2, 3)]
    work.checkout("main")
    merge = work.merge("side", "Merge side")
    work.commit("c3", {"a.py": "3\n"})
    bad = work.commit("c4", {"a.py": "4\n"})
    repo = Repo(work.path)
    for good in side:
        with pytest.raises(UsageError) as caught:
            repo.first_parent_range(good, "main")
        assert str(caught.value) == (
            f"good {good} is not on the first-parent line of bad {bad} (it came in through merge {merge}); "
            f"pick a good commit on that line, such as {merge}^1"
        )


def test_first_parent_range_across_merges_on_the_demo(demo: tuple[Repo, DemoManifest]) -> None:
    repo, manifest = demo
    line = first_parent_line(repo)
    assert len(line) == manifest.commits
    assert repo.first_parent_range(line[0], manifest.head) == line[1:]
    for merge in manifest.merges:
        position = line.index(merge)
        span = repo.first_parent_range(line[position - 2], line[position + 2])
        assert span == line[position - 1 : position + 3]
        side_parent = git(repo.path, "rev-parse", f"{merge}^2").strip()
        assert side_parent not in span
        with pytest.raises(UsageError, match="is not on the first-parent line"):
            repo.first_parent_range(side_parent, manifest.head)


def test_tree_hash_of_one_path_is_its_tree_id(small: GitRepo) -> None:
    repo = Repo(small.path)
    for rev in ("HEAD", "HEAD~2", "side"):
        assert repo.tree_hash(rev, ("backend",)) == sha_of(small, f"{rev}:backend")
    assert repo.tree_hash("HEAD", (".",)) == sha_of(small, "HEAD^{tree}")
    assert repo.tree_hash("HEAD", ("backend/a.py",)) == sha_of(small, "HEAD:backend/a.py")


def test_tree_hash_of_several_paths_and_of_missing_ones(small: GitRepo) -> None:
    repo = Repo(small.path)
    backend, docs = sha_of(small, "HEAD:backend"), sha_of(small, "HEAD:docs")
    expected = hashlib.sha256(f"backend {backend}\ndocs {docs}\n".encode()).hexdigest()
    assert repo.tree_hash("HEAD", ("docs", "backend")) == expected
    assert repo.tree_hash("HEAD", ("backend", "docs", "backend")) == expected
    with_missing = hashlib.sha256(f"backend {backend}\nsrc -\n".encode()).hexdigest()
    assert repo.tree_hash("HEAD", ("backend", "src")) == with_missing
    assert repo.tree_hash("HEAD", ("src",)) == hashlib.sha256(b"src -\n").hexdigest()
    with pytest.raises(UsageError, match="unknown revision 'nope'"):
        repo.tree_hashes(["HEAD", "nope"], ("backend",))


def test_tree_hashes_match_tree_hash(small: GitRepo) -> None:
    repo = Repo(small.path)
    revs = ["HEAD", "HEAD~1", "HEAD~2", "side", "HEAD~1"]
    for paths in (("backend",), ("backend", "docs")):
        hashes = repo.tree_hashes(revs, paths)
        assert list(hashes) == ["HEAD", "HEAD~1", "HEAD~2", "side"]
        assert hashes == {rev: repo.tree_hash(rev, paths) for rev in revs}


def test_tree_hash_changes_only_with_the_target_paths_on_the_demo(demo: tuple[Repo, DemoManifest]) -> None:
    repo, manifest = demo
    line = first_parent_line(repo)
    hashes = repo.tree_hashes(line, ("backend",))
    outside_only = touching = 0
    for parent, child in pairwise(line):
        changed = git(repo.path, "diff-tree", "--no-commit-id", "--name-only", "-r", parent, child).split()
        if any(name.startswith("backend/") for name in changed):
            touching += 1
            assert hashes[child] != hashes[parent]
        else:
            outside_only += 1
            assert hashes[child] == hashes[parent]
    assert outside_only > 40 and touching >= 8
    bug = manifest.bugs["target_verify_overwrite"]
    assert hashes[bug.fixed] == hashes[bug.relanded]
    before_fix = line[line.index(bug.fixed) - 1]
    assert hashes[bug.reverted] == hashes[before_fix] != hashes[bug.fixed]


def test_commit_infos_on_the_demo(demo: tuple[Repo, DemoManifest]) -> None:
    repo, manifest = demo
    line = first_parent_line(repo)
    infos = repo.commit_infos(line)
    assert [info.sha for info in infos] == line
    subjects = git(repo.path, "log", "--first-parent", "--reverse", "--format=%s", "main").splitlines()
    assert [info.subject for info in infos] == subjects
    assert infos[0].pr_number is None and infos[0].parents == ()
    assert all(info.pr_number is not None for info in infos[1:])
    assert [info.pr_number for info in infos[1:]] == sorted(info.pr_number for info in infos[1:])
    for info in infos[1:]:
        assert info.subject.endswith(f"#{info.pr_number})") or info.subject.startswith(
            f"Merge pull request #{info.pr_number} from "
        )
    for merge in manifest.merges:
        info = infos[line.index(merge)]
        assert len(info.parents) == 2 and info.parents[0] == line[line.index(merge) - 1]
    bug = manifest.bugs["target_verify_overwrite"]
    reverts = {info.sha: info.reverts_sha for info in infos if info.reverts_sha is not None}
    assert reverts == {bug.reverted: bug.fixed}
    revert = repo.commit_info(bug.reverted)
    assert revert.subject.startswith('Revert "Fix TRTLLM target verify query metadata (#')
    assert revert.pr_number == int(revert.subject.rsplit("(#", 1)[1].rstrip(")"))
    assert revert.authored_at.tzinfo is not None
    assert revert.authored_at.utcoffset().total_seconds() == 0
    assert revert.authored_at > infos[0].authored_at > datetime(2026, 1, 1, tzinfo=UTC)
    assert "<" in revert.author and revert.author.endswith("@example.com>")


def test_commit_infos_keep_the_order_given(small: GitRepo) -> None:
    repo = Repo(small.path)
    revs = ["HEAD~2", "HEAD", "side", "HEAD~2"]
    infos = repo.commit_infos(revs)
    assert [info.sha for info in infos] == [repo.resolve(rev) for rev in revs]
    assert [info.subject for info in infos] == ["c2", "c4", "s2", "c2"]
    assert repo.commit_infos([]) == []
    with pytest.raises(UsageError, match="unknown revision 'nope'"):
        repo.commit_infos(["HEAD", "nope"])


def test_pr_number_and_reverted_sha() -> None:
    assert pr_number("Fix the thing (#123)") == 123
    assert pr_number('Revert "Fix the thing (#123)" (#130)') == 130
    assert pr_number("Merge pull request #77 from dev/x") == 77
    assert pr_number("Mention #123 in passing") is None
    assert pr_number("Fix (#12) later") is None
    sha = "a" * 40
    assert reverted_sha(f'Revert "x"\n\nThis reverts commit {sha}.\n') == sha
    assert reverted_sha(f"Revert\n\nThis reverts commit {sha}, reversing\nchanges made to {'b' * 40}.\n") == sha
    assert reverted_sha("x\n\nThis reverts commit abc123.\n") is None
    assert paths_key(["docs", "backend", "docs"]) == "backend,docs"


def counting_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Put a ``git`` first on PATH that logs a line per process, then runs the real one; returns the log."""
    log, shim = tmp_path / "git-processes.log", tmp_path / "bin" / "git"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\necho git >> {log}\nexec {shutil.which("git")} "$@"\n')
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("GIT_PYTHON_GIT_EXECUTABLE", raising=False)
    return log


def git_processes(log: Path, query: Callable[[list[str]], object], shas: list[str]) -> int:
    """How many git processes ``query(shas)`` started."""
    log.unlink(missing_ok=True)
    query(shas)
    return len(log.read_text().splitlines()) if log.exists() else 0


@pytest.mark.slow
def test_bulk_queries_are_one_process_each(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build_demo_history(tmp_path / "big", 3000)
    repo = Repo(tmp_path / "big")
    shas = git(repo.path, "rev-list", "--reverse", "main").split()
    infos = repo.commit_infos(shas)
    hashes = repo.tree_hashes(shas, ("backend", "engine"))
    assert len(infos) == len(hashes) == len(shas) >= 3000
    log = counting_git(tmp_path, monkeypatch)
    for query in (repo.commit_infos, partial(repo.tree_hashes, paths=("backend", "engine"))):
        assert 0 < git_processes(log, query, shas) == git_processes(log, query, shas[:2])


def test_a_repositorys_fsmonitor_hook_does_not_run_during_regtracks_git_calls(tmp_path: Path) -> None:
    marker = tmp_path / "fsmonitor-ran"
    hook = tmp_path / "fsmonitor.sh"
    hook.write_text(f'#!/bin/sh\necho "$@" >> {marker}\nexit 1\n')
    hook.chmod(0o755)
    work = GitRepo(tmp_path / "work")
    work.commit("c0", {"backend/a.py": "a = 0\n"})
    work.commit("c1", {"backend/a.py": "a = 1\n"})
    work.git("config", "core.fsmonitor", str(hook))
    git(work.path, "diff-tree", "-p", "HEAD~1", "HEAD", "--", "backend")
    assert marker.exists(), "the hook runs for a plain git diff-tree"
    marker.unlink()
    repo = Repo(work.path)
    assert repo.first_parent_range("HEAD~1", "HEAD") == [work.head()]
    assert repo.patch_id("HEAD", ("backend",)) is not None
    repo.commit_infos(["HEAD", "HEAD~1"])
    repo.listing("HEAD", ("backend",))
    SnapshotCache(tmp_path / "cache").materialise(repo, "HEAD", ("backend",))
    assert not marker.exists(), marker.read_text()
