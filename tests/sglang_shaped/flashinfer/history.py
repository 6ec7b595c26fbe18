"""FlashInfer-shaped trees, on disk or as a git history with fixed authors and dates."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gitrepo import GitRepo

from ..tree import sglang_tree
from ..variant import Variant as SupportVariant
from .source import backend_text
from .spec import EAGLE_INFO, EAGLE_INFO_PATH, SPEC_UTILS, SPEC_UTILS_PATH
from .variant import BACKEND_PATH, Variant

SUPPORT_ERA = {"A": "B", "B": "C1"}
"""The era of the surrounding sglang modules each FlashInfer era is written into."""


def flashinfer_tree(v: Variant) -> dict[str, str]:
    """Every file of the revision, path -> text."""
    tree = sglang_tree(SupportVariant(SUPPORT_ERA[v.era]))
    tree[BACKEND_PATH] = backend_text(v)
    tree[EAGLE_INFO_PATH] = EAGLE_INFO
    tree[SPEC_UTILS_PATH] = SPEC_UTILS
    return tree


def write_tree(v: Variant, root: Path) -> Path:
    """The revision's files under ``root`` (its import root is ``root / "python"``)."""
    for path, text in flashinfer_tree(v).items():
        file = root / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text)
    return root


@dataclass(frozen=True)
class FlashInferManifest:
    path: Path
    commits: tuple[str, ...]
    """First-parent, oldest first."""
    roles: dict[str, str]
    """Role -> SHA."""


def build_flashinfer_history(path: Path, steps: Sequence[tuple[str, Variant, str | None]]) -> FlashInferManifest:
    """A repository on ``main`` with one commit per ``(subject, variant, role)``."""
    repo = GitRepo(path)
    shas, roles = [], {}
    for subject, variant, role in steps:
        repo.write(flashinfer_tree(variant))
        repo.git("add", "--all")
        repo.git("commit", "--quiet", "--allow-empty", "-m", subject)
        sha = repo.git("rev-parse", "HEAD").strip()
        shas.append(sha)
        if role is not None:
            roles[role] = sha
    return FlashInferManifest(path, tuple(shas), roles)
