"""Reuse by what a probe read: the files and directories of the snapshot a case read, and their
states at a revision.

Declared paths are coarse: importing SGLang's attention backend pulls in hundreds of its modules,
so a target's paths either hold everything (nothing is reused) or miss a file (a wrong reuse). A
case run in the worker therefore reports what it read (``tracker.execution.reads``): every file it
opened or tried to open, a module's source included, and every directory it listed, which is how an
import finds its module, so a module added where an import looks changes a listing. A command probe
cannot be traced; it declares ``reads``, paths whose whole content it depends on.

What a case read is kept as entries ``(KIND:PATH, STATE)``, PATH relative to the snapshot (the
repository's own path):

* ``f:PATH``: the blob id of a file (or symlink), ``-`` where there is none;
* ``d:PATH``: a digest of the names and modes a directory holds, ``-`` where there is none;
* ``t:PATH``: the object id of a declared path, the whole subtree for a directory, ``-`` where missing.

A stored result stands for another revision only when every entry has the same state there: every
file it read byte-identical, every directory it listed holding the same names. Everything else the
result depends on (probe version, environment, settings) stays in the store's keys. Not seen: a bare
``stat`` (``os.path.exists``) of a path in a directory nothing listed.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

ABSENT = "-"
TREE_MODE = "040000"

Entries = tuple[tuple[str, str], ...]
"""``(KIND:PATH, STATE)`` pairs, sorted."""


@dataclass(frozen=True)
class Reads:
    """What one case read under its snapshot's root, as the worker saw it: paths relative to the
    root ("" is the root itself). ``present`` holds the files that existed when read."""

    files: tuple[str, ...] = ()
    dirs: tuple[str, ...] = ()
    present: tuple[str, ...] = ()

    def to_json(self) -> dict[str, list[str]]:
        return {"files": list(self.files), "dirs": list(self.dirs), "present": list(self.present)}

    @classmethod
    def from_json(cls, data: Mapping[str, Sequence[str]]) -> Reads:
        return cls(tuple(data["files"]), tuple(data["dirs"]), tuple(data["present"]))


@dataclass(frozen=True)
class Listing:
    """The snapshot's view of one revision: each path's (mode, object id), and each directory's
    entries, from ``git ls-tree -r -t`` of the target's paths."""

    objects: Mapping[str, tuple[str, str]]
    children: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, rows: Iterable[tuple[str, str, str]]) -> Listing:
        """From ``(mode, object id, path)`` rows; the directories above a row are implied."""
        objects: dict[str, tuple[str, str]] = {}
        children: dict[str, set[tuple[str, str]]] = {"": set()}
        for mode, oid, path in rows:
            objects[path] = (mode, oid)
            parent, _, name = path.rpartition("/")
            children.setdefault(parent, set()).add((name, mode))
            if mode == TREE_MODE:
                children.setdefault(path, set())
        return cls(objects, {path: tuple(sorted(names)) for path, names in children.items()})

    def file_state(self, path: str) -> str:
        found = self.objects.get(path)
        return found[1] if found is not None and found[0] != TREE_MODE else ABSENT

    def dir_state(self, path: str) -> str:
        names = self.children.get(path)
        return ABSENT if names is None else _digest(names)

    def tree_state(self, path: str) -> str:
        found = self.objects.get(path.strip("/"))
        return found[1] if found is not None else ABSENT

    def state(self, key: str) -> str:
        kind, _, path = key.partition(":")
        return {"f": self.file_state, "d": self.dir_state, "t": self.tree_state}[kind](path)


def traced(reads: Reads, listing: Listing) -> Entries | None:
    """The entries of what a traced case read, at the revision it ran at; None when it read a file
    the revision does not hold (made by a setup step, or written by a case): nothing else can vouch
    for such a result."""
    present = set(reads.present)
    entries = {f"d:{path}": listing.dir_state(path) for path in reads.dirs}
    for path in reads.files:
        state = listing.file_state(path)
        if (state == ABSENT) == (path in present):
            return None
        entries[f"f:{path}"] = state
    return _sorted(entries)


def declared(paths: Sequence[str], listing: Listing) -> Entries:
    """The entries of a command probe's declared reads at a revision."""
    return _sorted({f"t:{path.strip('/')}": listing.tree_state(path) for path in paths})


def holds(entries: Entries, listing: Listing) -> bool:
    """Whether every file and directory of ``entries`` is in the same state at ``listing``'s revision."""
    return all(listing.state(key) == state for key, state in entries)


def entries_digest(entries: Entries) -> str:
    return _digest(entries)


def source_of_bytecode(path: str) -> str:
    """``pkg/__pycache__/mod.cpython-311.pyc`` -> ``pkg/mod.py``: a cached module read stands for its
    source, which the import then did not open. Other paths are returned as they are."""
    head, _, name = path.rpartition("/")
    parent, _, cache = head.rpartition("/")
    if cache != "__pycache__" or not name.endswith(".pyc"):
        return path
    module = name.split(".", 1)[0]
    return f"{parent}/{module}.py" if parent else f"{module}.py"


def relative_to_root(path: str, roots: Sequence[str]) -> str | None:
    """``path`` relative to the first of ``roots`` it lies in ("" for a root itself), else None."""
    for root in roots:
        if path == root:
            return ""
        if path.startswith(root + os.sep):
            return path[len(root) + 1 :]
    return None


def _sorted(entries: Mapping[str, str]) -> Entries:
    return tuple(sorted(entries.items()))


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, separators=(",", ":")).encode()).hexdigest()
