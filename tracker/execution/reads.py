"""What a case read of its snapshot, seen through Python's audit events (PEP 578).

Every ``open`` (``io.open_code`` too, which is how an import reads a module's source or bytecode,
bytecode standing for its source)
and every ``os.listdir``/``os.scandir`` (which is how an import looks for a module) raises an audit
event, whoever calls it: the probe, the revision's code, the import system. A hook installed once per
worker records, while a case runs, the paths under the snapshot's root; ``tracker.targets.inputs``
turns them into the states a stored result depends on.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tracker.targets.inputs import Reads, relative_to_root, source_of_bytecode

_FILE_EVENTS = frozenset({"open"})
_DIR_EVENTS = frozenset({"os.listdir", "os.scandir"})


class _Recorder:
    def __init__(self) -> None:
        self.roots: tuple[str, ...] = ()
        self.bytecode_prefix = os.path.abspath(sys.pycache_prefix) + os.sep if sys.pycache_prefix else None
        """Where this process keeps bytecode out of the source trees (a worker does), if anywhere."""
        self.files: set[str] = set()
        self.dirs: set[str] = set()

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if not self.roots or (event not in _FILE_EVENTS and event not in _DIR_EVENTS) or not args:
            return
        path = args[0]
        if path is None and event in _DIR_EVENTS:
            path = "."
        if isinstance(path, int) or path is None:
            return
        try:
            absolute = self._source_of_prefixed_bytecode(os.path.abspath(os.fsdecode(path)))
        except (TypeError, ValueError):
            return
        relative = relative_to_root(absolute, self.roots)
        if relative is not None:
            (self.files if event in _FILE_EVENTS else self.dirs).add(relative)

    def _source_of_prefixed_bytecode(self, path: str) -> str:
        """The source a module's cached bytecode stands for, where the bytecode lives under the
        pycache prefix (as the workers' does, out of the read-only snapshots): an import that finds
        it valid reads it and only stats the source, so the read is the source's. Other paths as
        they are. (Bytecode in a ``__pycache__`` under the root is mapped once the case ends.)"""
        if self.bytecode_prefix is None or not path.endswith(".pyc") or not path.startswith(self.bytecode_prefix):
            return path
        return importlib.util.source_from_cache(path)


_recorder: _Recorder | None = None


@contextmanager
def recording(root: Path) -> Iterator[list[Reads]]:
    """Record what the block reads under ``root``; the list it yields holds one ``Reads`` when the
    block ends."""
    global _recorder
    if _recorder is None:
        _recorder = _Recorder()
        sys.addaudithook(_recorder)
    recorder = _recorder
    recorder.roots = tuple(dict.fromkeys([os.path.abspath(root), os.path.realpath(root)]))
    recorder.files, recorder.dirs = set(), set()
    found: list[Reads] = []
    try:
        yield found
    finally:
        recorder.roots = ()
        files = sorted({source_of_bytecode(path) for path in recorder.files})
        present = [path for path in files if os.path.lexists(os.path.join(root, path))]
        found.append(Reads(tuple(files), tuple(sorted(recorder.dirs)), tuple(present)))
