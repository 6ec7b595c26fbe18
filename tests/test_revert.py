"""A culprit's change undone on a later commit (``tracker.targets.revert``), in real repositories:
the tree ``git revert --no-commit`` would leave, the same commit every time, conflicts named, and
the user's checkout, index, HEAD and refs left as they were."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from gitrepo import GitRepo, git

from tracker.targets.revert import IDENTITY, Conflict, Reverted, RevertFailed, revert_on

NOTES = "".join(f"n{i}\n" for i in range(10))


@pytest.fixture
def history(tmp_path: Path) -> tuple[GitRepo, str, str]:
    """``culprit`` changes ``lib/a``, ``logo.bin`` and the first line of ``notes``; later commits
    change ``lib/b`` and the last line of ``notes``; ``bad`` is the last one."""
    repo = GitRepo(tmp_path / "repo")
    repo.commit("Base", {"lib/a": "one\ntwo\nthree\n", "lib/b": "b0\n", "notes": NOTES, "logo.bin": "\0\1\2"})
    culprit = repo.commit(
        "Break a (#7)", {"lib/a": "one\nTWO\nthree\n", "notes": NOTES.replace("n0", "n1"), "logo.bin": "\0\7\2"}
    )
    repo.commit("Touch b", {"lib/b": "b1\n"})
    bad = repo.commit("Touch notes", {"notes": NOTES.replace("n0", "n1").replace("n9", "n10")})
    return repo, culprit, bad


def state(repo: GitRepo) -> tuple[str, ...]:
    """What a check must leave alone: status, staged changes, the index file, HEAD and every ref."""
    return (
        repo.git("status", "--porcelain", "--untracked-files=all"),
        repo.git("diff", "--cached", "--binary"),
        (repo.path / ".git" / "index").read_bytes().hex(),
        repo.git("rev-parse", "HEAD"),
        repo.git("for-each-ref"),
    )


def test_the_revert_holds_the_tree_git_revert_would_leave_on_top_of_the_bad_commit(
    history: tuple[GitRepo, str, str], tmp_path: Path
) -> None:
    repo, culprit, bad = history
    reverted = revert_on(repo.path, culprit, bad, "Break a (#7)", ["."])
    assert isinstance(reverted, Reverted)
    twin = tmp_path / "twin"
    shutil.copytree(repo.path, twin)
    git(twin, "revert", "--no-commit", culprit)
    assert repo.git("rev-parse", f"{reverted.sha}^{{tree}}") == git(twin, "write-tree")
    assert repo.git("rev-parse", f"{reverted.sha}^1").strip() == bad
    message = repo.git("log", "-1", "--format=%s%n%b", reverted.sha)
    assert message.startswith('Revert "Break a (#7)"\n') and f"This reverts commit {culprit}." in message
    assert "regtrack" in message
    assert repo.git("log", "-1", "--format=%an <%ae>|%ct", reverted.sha).strip() == (
        f"{IDENTITY[0]} <{IDENTITY[1]}>|" + repo.git("log", "-1", "--format=%ct", bad).strip()
    )


def test_the_same_check_writes_the_same_commit_and_leaves_the_users_repository_alone(
    history: tuple[GitRepo, str, str],
) -> None:
    repo, culprit, bad = history
    repo.write({"lib/b": "uncommitted work\n", "scratch": "untracked\n", "notes": "staged\n"})
    repo.git("add", "notes")
    before = state(repo)
    first = revert_on(repo.path, culprit, bad, "Break a (#7)", ["."])
    second = revert_on(repo.path, culprit, bad, "Break a (#7)", ["."])
    assert first == second and isinstance(first, Reverted)
    assert state(repo) == before
    assert first.sha not in repo.git("log", "--all", "--format=%H"), "the commit is on no branch"


def test_only_the_target_paths_are_reverted(history: tuple[GitRepo, str, str]) -> None:
    repo, culprit, bad = history
    reverted = revert_on(repo.path, culprit, bad, "Break a (#7)", ["lib"])
    assert isinstance(reverted, Reverted)
    assert repo.git("show", f"{reverted.sha}:lib/a") == "one\ntwo\nthree\n"
    at_bad = repo.git("show", f"{bad}:notes")
    assert repo.git("show", f"{reverted.sha}:notes") == at_bad, "outside the target's paths, the bad commit's"
    assert repo.git("show", f"{reverted.sha}:logo.bin") == "\0\7\2"
    whole = revert_on(repo.path, culprit, bad, "Break a (#7)", ["."])
    assert isinstance(whole, Reverted)
    assert repo.git("show", f"{whole.sha}:notes") == NOTES.replace("n9", "n10"), "merged with the later change"


def test_a_later_rewrite_of_the_culprits_lines_is_a_conflict_naming_the_paths(
    history: tuple[GitRepo, str, str],
) -> None:
    repo, culprit, _ = history
    bad = repo.commit("Rewrite a", {"lib/a": "one\nTWO, rewritten\nthree\n"})
    before = state(repo)
    found = revert_on(repo.path, culprit, bad, "Break a (#7)", ["lib"])
    assert found == Conflict(("lib/a",))
    assert state(repo) == before


def test_a_binary_change_is_undone(history: tuple[GitRepo, str, str]) -> None:
    repo, culprit, bad = history
    reverted = revert_on(repo.path, culprit, bad, "Break a (#7)", ["logo.bin"])
    assert isinstance(reverted, Reverted)
    assert repo.git("show", f"{reverted.sha}:logo.bin") == "\0\1\2"


def test_a_commit_git_cannot_read_is_a_failure_that_says_so(history: tuple[GitRepo, str, str]) -> None:
    repo, _, bad = history
    with pytest.raises(RevertFailed, match="git diff-tree failed"):
        revert_on(repo.path, "0" * 40, bad, "missing", ["."])
