"""What a probe's code hash covers: the module that defines its check and every module of the same
top-level package that it imports, directly or through another, at module level or inside a
function, and the packages above each of them (their ``__init__`` runs first). Editing a helper
the check imports (``probes.demo_backend.checks``) must change the hash, or a stored result of
the old helper would be reused as if nothing had changed.

Imports are read from the source (``ast``), not from what happens to be imported in this
process, so the parent and a worker hash the same files, and a check named by its module's name
is hashed without importing it (nor torch with it). Modules outside the package (torch,
flashinfer, the standard library) are left out: the environment's fingerprint records their
versions. An imported name that finds no file is left out too; should a module of that name
appear later, the hash changes.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from types import ModuleType


def module_closure_hash(module: ModuleType | str, extra: bytes = b"") -> str:
    """16 hex digits over the sources of ``module`` (a module, or a module's name) and of the
    modules of its package it imports, and over ``extra`` (what else a result depends on)."""
    digest = hashlib.sha256()
    for name, source in sorted(module_closure(module).items()):
        digest.update(f"{name}\0{len(source)}\0".encode())
        digest.update(source)
    if extra:
        digest.update(b"\0extra\0" + extra)
    return digest.hexdigest()[:16]


def module_closure(module: ModuleType | str) -> dict[str, bytes]:
    """Each module's name -> its source, for ``module`` and the modules of its top-level package it
    reaches by imports. ``module`` itself, made in memory without a file, is its name; a module
    given by name is found on disk, not imported."""
    start = module if isinstance(module, str) else module.__name__
    package = start.partition(".")[0]
    found: dict[str, bytes] = {}
    seen: set[str] = set()
    pending = _with_parents((start,))
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        path = _origin(name, module)
        if path is None:
            if name == start:
                found[name] = name.encode()
            continue
        found[name] = path.read_bytes()
        if path.suffix != ".py":  # a compiled extension or bytecode: hashed, not read for imports
            continue
        package_of_name = name if path.name == "__init__.py" else name.rpartition(".")[0]
        pending += [
            n for n in _with_parents(_imported_names(found[name], package_of_name)) if n.partition(".")[0] == package
        ]
    return found


def _with_parents(names: tuple[str, ...]) -> list[str]:
    """Each name and the packages above it: importing ``a.b.c`` runs ``a`` and ``a.b`` first."""
    return [".".join(parts[:i]) for parts in (n.split(".") for n in names) for i in range(1, len(parts) + 1)]


def _origin(name: str, root: ModuleType | str) -> Path | None:
    """The file of module ``name`` of ``root``'s top-level package, found on disk, not imported:
    ``importlib.util.find_spec("a.b.c")`` would import ``a.b``, and with it whatever ``a.b``
    imports (torch), only to learn that ``c`` is not a module."""
    if isinstance(root, ModuleType) and name == root.__name__:
        origin = getattr(root, "__file__", None)
        return Path(origin) if origin else None
    top, _, rest = name.partition(".")
    spec = importlib.util.find_spec(top)  # a top-level name imports nothing to be found
    if spec is None:
        return None
    if not rest:
        return Path(spec.origin) if spec.has_location and spec.origin else None
    *packages, last = rest.split(".")
    for folder in spec.submodule_search_locations or ():
        where = Path(folder).joinpath(*packages)
        for candidate in (
            where / f"{last}.py",
            where / last / "__init__.py",
            *(where / f"{last}{suffix}" for suffix in EXTENSION_SUFFIXES),
        ):
            if candidate.is_file():
                return candidate
    return None


@functools.lru_cache(maxsize=256)
def _imported_names(source: bytes, package: str) -> tuple[str, ...]:
    """Dotted names the source imports, relative ones resolved against ``package``. ``from a import
    b`` yields ``a`` and ``a.b``: b may be a submodule; a name that is not one finds no file and is
    dropped. Cached by source: the worker hashes its probe once per case."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):  # the check fails to import; its hash is its bytes
        return ()
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, package)
            if base is None:
                continue
            names.append(base)
            names += [f"{base}.{alias.name}" for alias in node.names if alias.name != "*"]
    return tuple(names)


def _absolute(node: ast.ImportFrom, package: str) -> str | None:
    if node.level == 0:
        return node.module
    try:
        return importlib.util.resolve_name("." * node.level + (node.module or ""), package)
    except (ImportError, ValueError):
        return None
