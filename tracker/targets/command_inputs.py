"""The files of the user's work tree that a command line runs, found as ``git bisect run`` finds them.

``git bisect run ./check.sh`` checks out each revision in the work tree, so a script git does not
track stays where the user wrote it and runs at every revision. A command here runs in a snapshot
of the revision instead, which holds only tracked files; so each word of the command line that
names an untracked file of the directory the command is given from (``./check.sh``,
``sh check.sh``, ``python bisect_check.py``), or any file by its absolute path, is an input: run
from where the user wrote it, and hashed into the probe's version, so that editing it measures
afresh. A tracked file stays the revision's own, as a checkout would have it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tracker.targets.revisions import Repo


def worktree_inputs(argv: Sequence[str], base: Path, repo: Repo) -> tuple[str, ...]:
    """The words of ``argv`` that name files to take from ``base`` rather than from the revision."""
    named = _named_files(argv, base)
    tracked = repo.tracked(list(named.values()))
    return tuple(word for word, path in named.items() if path not in tracked)


def _named_files(argv: Sequence[str], base: Path) -> dict[str, Path]:
    """Each word that names an existing file, relative to ``base`` or absolute. The program itself
    counts only when it is a path (``./check.sh``): a bare name is looked up on ``PATH``."""
    found = {}
    for position, word in enumerate(argv):
        if (position == 0 and "/" not in word) or not word or word.startswith("-"):
            continue
        path = Path(base, word)
        try:
            if path.is_file():
                found[word] = path.resolve()
        except OSError:  # a word too long to be a file name (python -c "<script>") names no file
            continue
    return found
