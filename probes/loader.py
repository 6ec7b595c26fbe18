"""Import a revision's ``backend`` package fresh from its checkout root."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

PACKAGE = "backend"


def purge(package: str = PACKAGE) -> None:
    """Forget every loaded module of ``package`` so the next import reads the files again."""
    for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        del sys.modules[name]


def load_backend(root: Path) -> ModuleType:
    """The ``backend`` package under ``root``, whatever ``backend`` was imported before.

    Raises whatever the revision's code raises on import (an untestable revision).
    """
    package_dir = Path(root) / PACKAGE
    if not (package_dir / "__init__.py").is_file():
        raise ModuleNotFoundError(f"no {PACKAGE}/__init__.py under {root}")
    purge()
    importlib.invalidate_caches()
    sys.path.insert(0, str(root))
    try:
        module = importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(root))
    loaded_from = Path(module.__file__).resolve().parent  # type: ignore[arg-type]
    if loaded_from != package_dir.resolve():
        raise ImportError(f"{PACKAGE} resolved to {loaded_from}, not {package_dir}")
    return module
