"""Import a revision's packages fresh from its import roots, and nothing else.

A case runs inside one revision (``revision``): the revision's import roots (directories of its
snapshot) go first on ``sys.path``, and when the case ends everything imported from them is
forgotten, so the next case, of this revision or another, reads the files again.

Every module of a package a probe asks for (``load_package``) must come from the import roots.
Putting them first on ``sys.path`` is not enough: a finder further down ``sys.meta_path`` (an
editable install's, which maps ``backend`` to this project's own checkout) would still supply a
submodule the revision lacks. So a finder at the front of ``sys.meta_path`` answers for the
package: it finds its modules under the roots only, and a module that is not there does not exist.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

PACKAGE = "backend"
"""The demo subject's package."""


class RevisionFinder(importlib.abc.MetaPathFinder):
    """Finds ``package`` and its submodules under ``roots`` and nowhere else."""

    def __init__(self, package: str, roots: Sequence[Path]) -> None:
        self.package = package
        self.roots = tuple(Path(root).resolve() for root in roots)

    def owns(self, fullname: str) -> bool:
        return fullname == self.package or fullname.startswith(self.package + ".")

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if not self.owns(fullname):
            return None
        search = [str(root) for root in self.roots] if fullname == self.package else list(path or [])
        spec = importlib.machinery.PathFinder.find_spec(fullname, search)
        if spec is None or not self._inside(spec):
            where = ", ".join(str(root) for root in self.roots)
            raise ModuleNotFoundError(f"No module named {fullname!r} in the revision at {where}", name=fullname)
        return spec

    def _inside(self, spec: ModuleSpec) -> bool:
        places = [spec.origin] if spec.has_location and spec.origin else []
        places += list(spec.submodule_search_locations or [])
        return bool(places) and all(
            any(Path(place).resolve().is_relative_to(root) for root in self.roots) for place in places
        )


@dataclass(frozen=True)
class _Entered:
    roots: tuple[str, ...]
    """The import roots as put on ``sys.path``."""
    before: frozenset[str]
    """The modules loaded when the revision was entered: not the revision's."""


_entered: _Entered | None = None


@contextmanager
def revision(roots: Sequence[Path]) -> Iterator[None]:
    """Imports come from the revision at ``roots`` until the block ends; then it is forgotten."""
    enter(roots)
    try:
        yield
    finally:
        purge()


def enter(roots: Sequence[Path]) -> None:
    """Forget the revision entered before and put ``roots`` first on ``sys.path``."""
    global _entered
    purge()
    paths = _paths(roots)
    sys.path[:0] = paths
    importlib.invalidate_caches()
    _entered = _Entered(paths, frozenset(sys.modules))


def load_package(name: str, roots: Sequence[Path]) -> ModuleType:
    """The package (or module) ``name`` of the revision at ``roots``, whatever was imported under
    that name before. Within one revision a package is imported once: the modules of the packages
    one case asks for belong together.

    The finder stays in place until the revision is forgotten, so modules the revision imports
    lazily, while a probe runs, come from the same roots. Raises whatever the revision's code raises
    on import (an untestable revision).
    """
    if _entered is None or _entered.roots != _paths(roots):
        enter(roots)
    top = name.partition(".")[0]
    if not any(isinstance(finder, RevisionFinder) and finder.package == top for finder in sys.meta_path):
        for loaded in [m for m in sys.modules if m == top or m.startswith(top + ".")]:
            del sys.modules[loaded]
        sys.meta_path.insert(0, RevisionFinder(top, roots))
        importlib.invalidate_caches()
    return importlib.import_module(name)


def load_backend(root: Path) -> ModuleType:
    """The demo's ``backend`` package under ``root``, imported fresh."""
    enter([root])
    return load_package(PACKAGE, [root])


def purge() -> None:
    """Forget the revision entered last: its finders, its ``sys.path`` entries, the packages they
    guarded and every module imported from its roots, so the next import reads the files again."""
    global _entered
    finders = [finder for finder in sys.meta_path if isinstance(finder, RevisionFinder)]
    sys.meta_path[:] = [finder for finder in sys.meta_path if not isinstance(finder, RevisionFinder)]
    doomed = {name for name in sys.modules if any(finder.owns(name) for finder in finders)}
    if _entered is not None:
        doomed |= _imported_from(_entered)
        for path in _entered.roots:
            if path in sys.path:
                sys.path.remove(path)
    for name in doomed:
        sys.modules.pop(name, None)
    _entered = None


def _imported_from(entered: _Entered) -> set[str]:
    """The modules imported since ``entered`` whose top-level package or module lies in its roots."""
    roots = set(entered.roots)
    new = [name for name in sys.modules if name not in entered.before]
    tops = {name.partition(".")[0] for name in new}
    ours = {top for top in tops if _directory_holding(sys.modules.get(top)) & roots}
    return {name for name in new if name.partition(".")[0] in ours}


def _directory_holding(module: ModuleType | None) -> set[str]:
    """The directories a top-level module was found in (a package's parent directories)."""
    spec = getattr(module, "__spec__", None)
    if spec is None:
        return set()
    if spec.submodule_search_locations:
        return {os.path.dirname(os.path.realpath(place)) for place in spec.submodule_search_locations}
    return {os.path.dirname(os.path.realpath(spec.origin))} if spec.has_location and spec.origin else set()


def _paths(roots: Sequence[Path]) -> tuple[str, ...]:
    return tuple(str(Path(root).resolve()) for root in roots)
