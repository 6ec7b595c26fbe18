"""Triton-shaped trees, on disk or as a git history with fixed authors and dates."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..steps import StepsManifest, build_steps_history, write_files
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
    return write_files(triton_tree(v), root)


def build_triton_history(path: Path, steps: Sequence[tuple[str, Variant, str | None]]) -> StepsManifest:
    """A repository on ``main`` with one commit per ``(subject, variant, role)``."""
    return build_steps_history(path, steps, triton_tree)
