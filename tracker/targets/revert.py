"""A commit's change undone on a later commit, as ``git revert --no-commit`` would, written without
touching the user's checkout.

To check a culprit C named before a bad commit B, regtrack measures B with C's change undone. The
tree is built in a temporary index (``GIT_INDEX_FILE``): B's tree is read into it, the reverse of
C's diff to the target paths is applied with a three-way merge (plain ``git apply --cached`` where
the merge cannot run), and the result is committed on top of B with a fixed identity and B's dates,
so the same check always writes the same commit. The work tree, the user's index, HEAD and every
ref stay as they were: the only trace is unreachable objects in the repository's object store,
which ``git gc`` prunes like any other garbage.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tracker.targets.revisions import git_command, git_environment

IDENTITY = ("regtrack", "regtrack@localhost")
"""The author and committer of every commit regtrack writes."""
DIFF_OPTIONS = ("-p", "--binary", "--full-index", "--no-color", "--no-ext-diff", "--no-textconv", "--no-renames")
APPLY_OPTIONS = ("--cached", "--whitespace=nowarn")
"""The index only, and whatever whitespace the user's ``apply.whitespace`` would refuse."""
# Paths git apply names when a hunk or a file does not fit the index it applies to.
APPLY_FAILURE = re.compile(
    r"^error: (?:patch failed: (?P<hunk>.+):\d+"
    r"|(?P<file>.+): (?:does not exist in|already exists in|does not match) index)$"
)


@dataclass(frozen=True)
class Reverted:
    """The commit regtrack wrote: ``bad`` with ``culprit``'s change undone."""

    sha: str


@dataclass(frozen=True)
class Conflict:
    """``culprit``'s change cannot be undone on ``bad``: these paths changed since in its way."""

    paths: tuple[str, ...]


class RevertFailed(RuntimeError):
    """git could not write the revert for another reason than a conflict (a read-only object store, say)."""


def revert_on(repo: Path, culprit: str, bad: str, subject: str, paths: Sequence[str]) -> Reverted | Conflict:
    """``bad`` with the change ``culprit`` made to ``paths`` undone, as a commit whose parent is
    ``bad``; or the paths where that change no longer applies. ``subject`` is the culprit's."""
    with tempfile.TemporaryDirectory(prefix="regtrack-revert-") as scratch:
        git = _Git(repo, Path(scratch) / "index")
        patch = git.output("diff-tree", *DIFF_OPTIONS, culprit, f"{culprit}^1", "--", *paths)
        if not patch:
            git.read_tree(bad)
        elif (conflict := git.apply(bad, patch)) is not None:
            return conflict
        tree = git.output("write-tree").decode().strip()
        return Reverted(git.commit(tree, bad, revert_message(culprit, subject)))


def revert_message(culprit: str, subject: str) -> str:
    """What the commit says: a revert as git words one, and who wrote it and why."""
    return (
        f'Revert "{subject}"\n\nThis reverts commit {culprit}.\n\n'
        f"Written by regtrack to check culprit {culprit[:12]}; on no branch.\n"
    )


class _Git:
    """git commands in ``repo`` that read and write the index at ``index`` only."""

    def __init__(self, repo: Path, index: Path) -> None:
        self.repo = repo
        self.environment = {**git_environment(), "GIT_INDEX_FILE": str(index)}

    def run(
        self, *args: str, stdin: bytes = b"", env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        environment = env or self.environment
        return subprocess.run(
            git_command(*args), cwd=self.repo, env=environment, input=stdin, capture_output=True, check=False
        )

    def output(self, *args: str, stdin: bytes = b"", env: dict[str, str] | None = None) -> bytes:
        result = self.run(*args, stdin=stdin, env=env)
        if result.returncode != 0:
            raise RevertFailed(f"git {args[0]} failed in {self.repo}: {result.stderr.decode(errors='replace').strip()}")
        return result.stdout

    def read_tree(self, commit: str) -> None:
        self.output("read-tree", commit)

    def apply(self, bad: str, patch: bytes) -> Conflict | None:
        """Apply ``patch`` to ``bad``'s tree in the index: a three-way merge first, then as a plain
        patch where the merge could not run (it leaves no conflict behind)."""
        self.read_tree(bad)
        merged = self.run("apply", *APPLY_OPTIONS, "--3way", "-", stdin=patch)
        if merged.returncode == 0:
            return None
        unmerged = self.output("ls-files", "-u", "-z", "--full-name").split(b"\0")
        if conflicts := sorted({entry.split(b"\t", 1)[1].decode() for entry in unmerged if b"\t" in entry}):
            return Conflict(tuple(conflicts))
        self.read_tree(bad)
        plain = self.run("apply", *APPLY_OPTIONS, "-", stdin=patch)
        if plain.returncode == 0:
            return None
        return Conflict(_failed_paths(plain.stderr.decode(errors="replace")))

    def commit(self, tree: str, parent: str, message: str) -> str:
        """The commit of ``tree`` on ``parent``, dated as ``parent`` was committed: the same check
        writes the same commit, whoever runs it and whenever."""
        date = _committer_date(self.output("cat-file", "commit", parent))
        name, email = IDENTITY
        identity = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": date}
        identity |= {"GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email, "GIT_COMMITTER_DATE": date}
        settings = ("-c", "i18n.commitEncoding=UTF-8")
        args = (*settings, "commit-tree", "--no-gpg-sign", tree, "-p", parent)
        return self.output(*args, stdin=message.encode(), env={**self.environment, **identity}).decode().strip()


def _committer_date(commit: bytes) -> str:
    """The committer's timestamp and zone (``1767603600 +0000``) of a raw commit object."""
    header = commit.split(b"\n\n", 1)[0]
    for line in header.split(b"\n"):
        if line.startswith(b"committer "):
            stamp, zone = line.rsplit(b" ", 2)[1:]
            return f"@{stamp.decode()} {zone.decode()}"
    raise RevertFailed("the bad commit has no committer line")


def _failed_paths(stderr: str) -> tuple[str, ...]:
    """The paths ``git apply`` names where the patch does not fit."""
    found = (APPLY_FAILURE.match(line) for line in stderr.splitlines())
    return tuple(sorted({m["hunk"] or m["file"] for m in found if m}))
