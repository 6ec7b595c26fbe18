"""Commit metadata of a commit written in another encoding than UTF-8, as ``git log`` re-encodes it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from gitrepo import GitRepo, git_env

from tracker.targets.revisions import Repo


def latin_1_commit(repo: GitRepo, parent: str) -> str:
    """A commit object whose ``encoding`` header says ISO-8859-1, with author and message in it."""
    tree = repo.git("rev-parse", f"{parent}^{{tree}}").strip()
    raw = (
        f"tree {tree}\nparent {parent}\n".encode()
        + "author Zoë Ünal <zoe@example.com> 1767603700 +0000\n".encode("latin-1")
        + b"committer C <c@example.com> 1767603700 +0000\nencoding ISO-8859-1\n\n"
        + "Café au lait\nwith crème (#3)\n\nThe body, in Latin-1: déjà vu.\n".encode("latin-1")
    )
    command = ["git", "hash-object", "-t", "commit", "-w", "--stdin"]
    written = subprocess.run(command, cwd=repo.path, env=git_env(), input=raw, capture_output=True, check=True)
    sha = written.stdout.decode().strip()
    repo.git("update-ref", "refs/heads/main", sha)
    return sha


def test_a_latin_1_commit_reads_in_utf_8_alone_and_among_others(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "repo")
    first = repo.commit("Initial import", {"a.txt": "a\n"})
    sha = latin_1_commit(repo, first)
    opened = Repo(repo.path)
    info = opened.commit_info(sha)
    assert info.subject == "Café au lait with crème (#3)" and info.pr_number == 3
    assert info.author == "Zoë Ünal <zoe@example.com>"
    assert opened.commit_infos([first, sha])[1] == info
