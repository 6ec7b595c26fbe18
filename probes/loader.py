"""Import a revision's ``backend`` package fresh from its checkout root, and nothing else.

Every module of the package must come from the revision's directory. Putting the root first on
``sys.path`` is not enough: a finder further down ``sys.meta_path`` (an editable install's, which
maps ``backend`` to this project's own checkout) would still supply a submodule the revision lacks.
So while a revision is loaded, a finder at the front of ``sys.meta_path`` answers for the package:
it finds its modules under the root only, and a module that is not there does not exist.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

PACKAGE = "backend"


class RevisionFinder(importlib.abc.MetaPathFinder):
    """Finds ``package`` and its submodules under ``root`` and nowhere else."""

    def __init__(self, package: str, root: Path) -> None:
        self.package, self.root = package, root.resolve()

    def owns(self, fullname: str) -> bool:
        return fullname == self.package or fullname.startswith(self.package + ".")

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if not self.owns(fullname):
            return None
        search = [str(self.root)] if fullname == self.package else list(path or [])
        spec = importlib.machinery.PathFinder.find_spec(fullname, search)
        if spec is None or not self._inside(spec):
            raise ModuleNotFoundError(f"No module named {fullname!r} in the revision at {self.root}", name=fullname)
        return spec

    def _inside(self, spec: ModuleSpec) -> bool:
        places = [spec.origin] if spec.has_location and spec.origin else []
        places += list(spec.submodule_search_locations or [])
        return bool(places) and all(Path(place).resolve().is_relative_to(self.root) for place in places)


def purge(package: str = PACKAGE) -> None:
    """Forget every loaded module of ``package`` (and the finder that loaded it), so the next
    import reads the files again."""
    sys.meta_path[:] = [f for f in sys.meta_path if not (isinstance(f, RevisionFinder) and f.package == package)]
    for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        del sys.modules[name]


def load_backend(root: Path) -> ModuleType:
    """The ``backend`` package under ``root``, whatever ``backend`` was imported before.

    The finder stays in place until the next load, so modules the revision imports lazily, while
    a probe runs, come from the same root. Raises whatever the revision's code raises on import
    (an untestable revision).
    """
    package_dir = Path(root) / PACKAGE
    if not (package_dir / "__init__.py").is_file():
        raise ModuleNotFoundError(f"no {PACKAGE}/__init__.py under {root}")
    purge()
    importlib.invalidate_caches()
    sys.meta_path.insert(0, RevisionFinder(PACKAGE, Path(root)))
    return importlib.import_module(PACKAGE)
