"""FA3-shaped trees, on disk or as a git history with fixed authors and dates."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..steps import StepsManifest, build_steps_history, write_files
from ..tree import sglang_tree
from ..variant import Variant as SupportVariant
from .source import backend_text
from .variant import BACKEND_PATH, Variant

SUPPORT_ERA = {"F0": "B", "F1": "B", "F4": "C1"}
"""The era of the surrounding sglang modules each FA3 era is written into."""


def fa3_tree(v: Variant) -> dict[str, str]:
    """Every file of the revision, path -> text."""
    tree = sglang_tree(SupportVariant(SUPPORT_ERA[v.era]))
    tree[BACKEND_PATH] = backend_text(v)
    return tree


def write_tree(v: Variant, root: Path) -> Path:
    """The revision's files under ``root`` (its import root is ``root / "python"``)."""
    return write_files(fa3_tree(v), root)


def build_fa3_history(path: Path, steps: Sequence[tuple[str, Variant, str | None]]) -> StepsManifest:
    """A repository on ``main`` with one commit per ``(subject, variant, role)``."""
    return build_steps_history(path, steps, fa3_tree)
