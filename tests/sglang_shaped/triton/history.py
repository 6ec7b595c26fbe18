"""Triton-shaped trees, on disk or as a git history with fixed authors and dates."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gitrepo import GitRepo

from ..tree import sglang_tree
from ..variant import Variant as SupportVariant
from .source import backend_text, spec_utils_text
from .variant import BACKEND_PATH, SPEC_UTILS_PATH, Variant

SUPPORT_ERA = {"T0": "B", "T1": "B", "T3": "C1"}
"""The era of the surrounding sglang modules each Triton era is written into."""


def triton_tree(v: Variant) -> dict[str, str]:
    """Every file of the revision, path -> text."""
    tree = sglang_tree(SupportVariant(SUPPORT_ERA[v.era]))
    tree[BACKEND_PATH] = backend_text(v)
    if v.drafts:
        tree[SPEC_UTILS_PATH] = spec_utils_text()
    return tree


def write_tree(v: Variant, root: Path) -> Path:
    """The revision's files under ``root`` (its import root is ``root / "python"``)."""
    for path, text in triton_tree(v).items():
        file = root / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text)
    return root


@dataclass(frozen=True)
class TritonManifest:
    path: Path
    commits: tuple[str, ...]
    """First-parent, oldest first."""
    roles: dict[str, str]
    """Role -> SHA."""


def build_triton_history(path: Path, steps: Sequence[tuple[str, Variant, str | None]]) -> TritonManifest:
    """A repository on ``main`` with one commit per ``(subject, variant, role)``."""
    repo = GitRepo(path)
    shas, roles = [], {}
    for subject, variant, role in steps:
        repo.write(triton_tree(variant))
        repo.git("add", "--all")
        repo.git("commit", "--quiet", "--allow-empty", "-m", subject)
        sha = repo.git("rev-parse", "HEAD").strip()
        shas.append(sha)
        if role is not None:
            roles[role] = sha
    return TritonManifest(path, tuple(shas), roles)
