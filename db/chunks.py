"""Values bound in one SQL ``IN (...)``, a bounded number at a time.

SQLite refuses a statement with more than 32,766 parameters, and a range of 50,000 commits is
ordinary: every query that filters by commits, trees or run ids binds them a chunk at a time.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from typing import Protocol, TypeVar

CHUNK = 500
PORTABLE_VARIABLE_LIMIT = 32_766
"""SQLite's default bound on one statement's parameters. Some builds raise it (Debian's is
250,000); every connection regtrack opens lowers it back, so a query that works on one machine
works on all."""
K = TypeVar("K")


def chunked(values: Sequence[K], size: int = CHUNK) -> Iterator[Sequence[K]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


def keyed_filter(shas: Sequence[str] | None, trees: Sequence[str] | None) -> tuple[str, list[str] | None]:
    """Which of a runs query's long filters is given, and its values: ``("sha", ...)``,
    ``("tree_hash", ...)``, or ``("", None)`` for neither."""
    if shas is not None and trees is not None:
        raise ValueError("filter runs by commits or by trees, not both")
    if shas is not None:
        return "sha", list(shas)
    if trees is not None:
        return "tree_hash", list(trees)
    return "", None


R = TypeVar("R", bound="HasId")


class HasId(Protocol):
    @property
    def id(self) -> int: ...


def newest_first(rows: list[R], limit: int | None) -> list[R]:
    """Rows gathered chunk by chunk, newest (highest id) first, the first ``limit`` of them."""
    ordered = sorted(rows, key=lambda row: row.id, reverse=True)
    return ordered if limit is None else ordered[:limit]


def portable_limits(connection: sqlite3.Connection) -> None:
    """Bound ``connection``'s parameters per statement as SQLite does by default (Python 3.11 on)."""
    if hasattr(connection, "setlimit"):
        current = connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
        connection.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, min(current, PORTABLE_VARIABLE_LIMIT))
