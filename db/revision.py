"""The newest schema revision, read from the migration files without importing alembic (a third of
a second of imports for a command that finds the database at that revision)."""

from __future__ import annotations

import ast
import threading
from functools import cache
from pathlib import Path

MIGRATIONS = Path(__file__).with_name("migrations") / "versions"
_PARSING = threading.Lock()
"""CPython 3.11 before 3.11.8 can fail ``ast.parse`` run in two threads at once ("AST constructor
recursion depth mismatch"); stores opened in several threads read the head here one at a time."""


def head_revision() -> str | None:
    """The newest migration, read from the migration files' ``revision`` and ``down_revision``
    (None unless exactly one revision has no successor), once per process."""
    with _PARSING:
        return _head_revision()


@cache
def _head_revision() -> str | None:
    revisions: dict[str, str | None] = {}
    for path in MIGRATIONS.glob("*.py"):
        names: dict[str, object] = {}
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                names.update({target.id: node.value.value for target in node.targets if isinstance(target, ast.Name)})
        if isinstance(names.get("revision"), str):
            down = names.get("down_revision")
            revisions[str(names["revision"])] = down if isinstance(down, str) else None
    heads = set(revisions) - set(revisions.values())
    return heads.pop() if len(heads) == 1 else None
