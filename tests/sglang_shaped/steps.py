"""A history of one backend's shaped revisions: a commit per ``(subject, variant, role)``, each
writing the whole tree that variant makes; and the same tree written to a plain folder."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from gitrepo import GitRepo

V = TypeVar("V")


@dataclass(frozen=True)
class StepsManifest:
    path: Path
    commits: tuple[str, ...]
    """First-parent, oldest first."""
    roles: dict[str, str]
    """Role -> SHA."""


def write_files(files: dict[str, str], root: Path) -> Path:
    """``files`` (path -> text) under ``root``; the import root is ``root / "python"``."""
    for path, text in files.items():
        file = root / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text)
    return root


def build_steps_history(
    path: Path, steps: Sequence[tuple[str, V, str | None]], tree_of: Callable[[V], dict[str, str]]
) -> StepsManifest:
    """A repository on ``main`` with one commit per ``(subject, variant, role)``."""
    repo = GitRepo(path)
    shas, roles = [], {}
    for subject, variant, role in steps:
        repo.write(tree_of(variant))
        repo.git("add", "--all")
        repo.git("commit", "--quiet", "--allow-empty", "-m", subject)
        sha = repo.git("rev-parse", "HEAD").strip()
        shas.append(sha)
        if role is not None:
            roles[role] = sha
    return StepsManifest(path, tuple(shas), roles)
