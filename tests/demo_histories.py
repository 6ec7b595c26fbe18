"""Demo histories shared by the whole test session: each size is built once, read by every test
that only reads it, and copied (same SHAs, same work tree) for a test that writes to it."""

from __future__ import annotations

import shutil
from pathlib import Path

from gitrepo import git

from tracker.demo.history import DemoManifest, build_demo_history


class DemoHistories:
    """The demo histories of one session, kept under ``root``, one per number of commits."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._built: dict[int, tuple[Path, DemoManifest]] = {}
        self._states: dict[int, str] = {}

    def shared(self, commits: int) -> tuple[Path, DemoManifest]:
        """The history of ``commits`` commits, built on first use; its readers must not write to it."""
        if commits not in self._built:
            path = self._root / f"demo-{commits}"
            self._built[commits] = (path, build_demo_history(path, commits))
            self._states[commits] = state(path)
        return self._built[commits]

    def copy(self, commits: int, path: Path) -> DemoManifest:
        """A private copy at ``path`` of the history of ``commits`` commits, for a test that writes to it."""
        source, manifest = self.shared(commits)
        shutil.copytree(source, path, symlinks=True)
        return manifest

    def written_to(self) -> list[Path]:
        """The shared histories whose refs, HEAD or work tree differ from what was built."""
        return [path for commits, (path, _) in self._built.items() if state(path) != self._states[commits]]


def state(repo: Path) -> str:
    """What a test that writes to ``repo`` would change: refs, HEAD, and every file of the work tree."""
    asked = (("for-each-ref",), ("rev-parse", "HEAD"), ("--no-optional-locks", "status", "--porcelain", "--ignored"))
    return "".join(git(repo, *args) for args in asked)
