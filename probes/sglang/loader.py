"""Import a real SGLang revision's modules on a machine without a GPU.

``sglang`` becomes a bare package whose ``__path__`` is the snapshot's ``sglang`` directory (its
``__init__.py``, which starts a runtime, is not run), and every ``sglang.*`` module comes from the
snapshot. Third-party modules the revision imports are real where installed, except the declared
GPU libraries, which are stubs, as are modules this machine lacks (only when revision code asks for
them). A revision module whose body raises here is replaced by a degraded module and recorded.
Known metadata kernels are replaced by their CPU versions (``probes.sglang.kernels``) as their
modules load.

The finders are :class:`probes.loader.RevisionFinder` subclasses, so ``probes.loader.purge`` (the
end of every case) removes them with every ``sglang`` module and every stub module they installed.
"""

from __future__ import annotations

import builtins
import importlib
import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

from probes import loader as revision_loader
from probes.api import ProbeContext, RevisionImportError
from probes.sglang import kernels
from probes.sglang.stubs import DegradedModule, StubLedger, StubModule

PACKAGE = "sglang"
BACKEND_MODULE = "sglang.srt.layers.attention.trtllm_mha_backend"
FORWARD_BATCH_MODULE = "sglang.srt.model_executor.forward_batch_info"

GPU_LIBRARIES = frozenset(
    {
        "flashinfer",
        "sgl_kernel",
        "triton",
        "flash_attn",
        "flash_mla",
        "deep_gemm",
        "deep_ep",
        "vllm",
        "cutlass",
        "cuda",
        "nvidia",
        "pynvml",
        "tilelang",
        "aiter",
        "torch_npu",
        "mooncake",
        "nixl",
        "quack",
        "sgl_fa4",
        "cuda_python",
    }
)
"""Always stubs when revision code imports them: GPU kernels and the runtimes they need."""

ALIASES = {"dill": "pickle"}
"""Missing modules that a standard module stands in for."""

TORCH_FIRST = ("torch._dynamo",)
"""torch modules that probe for numpy/triton when first imported: imported before any stub exists,
so that they see this machine as it is (the import shield covers the rest)."""


class SglangFinder(revision_loader.RevisionFinder):
    """``sglang`` as a bare package of the snapshot; its modules through :class:`GuardedLoader`."""

    def __init__(self, roots: Sequence[Path], ledger: StubLedger) -> None:
        super().__init__(PACKAGE, roots)
        self.ledger = ledger
        self.shield: ImportShield | None = None

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if not self.owns(fullname):
            return None
        if fullname == PACKAGE:
            return self._bare_package()
        spec = importlib.machinery.PathFinder.find_spec(fullname, list(path or []))
        if spec is None or spec.loader is None:
            return None
        spec.loader = GuardedLoader(spec.loader, self.ledger)
        return spec

    def _bare_package(self) -> ModuleSpec:
        for root in self.roots:
            directory = root / PACKAGE
            if directory.is_dir():
                spec = ModuleSpec(PACKAGE, _BareLoader(), is_package=True, origin=str(directory))
                spec.submodule_search_locations = [str(directory)]
                return spec
        where = ", ".join(str(root) for root in self.roots)
        raise ModuleNotFoundError(f"No package {PACKAGE!r} in the revision at {where}", name=PACKAGE)


class _BareLoader(importlib.abc.Loader):
    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        module.__file__ = None


class GuardedLoader(importlib.abc.Loader):
    """Runs a revision module's body as import time (stubs answer calls), degrades it when it
    raises, and puts the CPU version in place of a known kernel it defines."""

    def __init__(self, inner: importlib.abc.Loader, ledger: StubLedger) -> None:
        self.inner = inner
        self.ledger = ledger

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        with self.ledger.module_body():
            try:
                self.inner.exec_module(module)  # type: ignore[attr-defined]
            except Exception as exc:
                self.ledger.degraded[module.__name__] = _one_line(exc)
                module = DegradedModule(module, self.ledger)
                sys.modules[module.__name__] = module
        kernels.substitute(module, self.ledger)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class StubFinder(revision_loader.RevisionFinder):
    """Answers imports that revision code makes of ``names`` (or of any module, where ``names`` is
    None: placed last, it is asked only for modules nothing else finds) with stub modules."""

    def __init__(self, roots: Sequence[Path], ledger: StubLedger, names: frozenset[str] | None, why: str) -> None:
        super().__init__("<stubs>", roots)
        self.ledger = ledger
        self.names = names
        self.why = why
        self.tops: set[str] = set()

    def owns(self, fullname: str) -> bool:
        return fullname.partition(".")[0] in self.tops

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        top = fullname.partition(".")[0]
        if top == PACKAGE or (self.names is not None and top not in self.names) or top in sys.stdlib_module_names:
            return None
        loaded = sys.modules.get(top)
        if (loaded is not None and not isinstance(loaded, StubModule)) or not _asked_by_revision():
            return None
        self.tops.add(top)
        why = f"alias of {ALIASES[fullname]}" if fullname in ALIASES else self.why
        self.ledger.modules[fullname] = why
        return ModuleSpec(fullname, _StubLoader(self.ledger), is_package=True)


class _StubLoader(importlib.abc.Loader):
    def __init__(self, ledger: StubLedger) -> None:
        self.ledger = ledger

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        if spec.name in ALIASES:
            return _AliasModule(spec.name)
        return StubModule(spec.name, self.ledger, spec)

    def exec_module(self, module: ModuleType) -> None:
        if isinstance(module, _AliasModule):
            sys.modules[module.__name__] = importlib.import_module(ALIASES[module.__name__])


class _AliasModule(ModuleType):
    """Placeholder replaced by the aliased module while it loads."""


def _asked_by_revision() -> bool:
    """Whether the import under way comes from revision code."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if not (name.startswith(("importlib", "_frozen_importlib")) or name == __name__):
            return _is_revision(frame.f_globals)
        frame = frame.f_back
    return False


class ImportShield:
    """``builtins.__import__`` while a revision is loaded: code outside the revision (torch, most
    of all, which imports triton and numpy lazily) that imports a stubbed module finds it missing,
    as it is on this machine, instead of getting the revision's stub (a library that caches such
    an answer keeps it for the process). It steps aside by itself once its revision is purged,
    and puts back the environment variables changed meanwhile (SGLang sets some at import)."""

    def __init__(self, revision: SglangFinder, stubs: Sequence[StubFinder]) -> None:
        self.original: Callable[..., ModuleType] = builtins.__import__
        self.revision = revision
        self.stubs = tuple(stubs)
        self.environ = dict(os.environ)

    def arm(self) -> None:
        if builtins.__import__ is not self:
            self.original = builtins.__import__
            builtins.__import__ = self  # type: ignore[assignment]  # a callable with __import__'s signature

    def step_aside(self) -> None:
        original = self.original
        if builtins.__import__ is self:
            builtins.__import__ = original
        if dict(os.environ) != self.environ:
            os.environ.clear()
            os.environ.update(self.environ)

    def __call__(
        self, name: str, globals: dict[str, Any] | None = None, locals: Any = None, fromlist: Any = (), level: int = 0
    ) -> ModuleType:
        if self.revision not in sys.meta_path:
            self.step_aside()
            return self.original(name, globals, locals, fromlist, level)
        if level == 0 and not _is_revision(globals) and any(f.owns(name) for f in self.stubs):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return self.original(name, globals, locals, fromlist, level)


def _is_revision(namespace: dict[str, Any] | None) -> bool:
    name = (namespace or {}).get("__name__", "")
    return name == PACKAGE or name.startswith(PACKAGE + ".")


@dataclass
class LoadedRevision:
    """A revision's modules, imported for one case, and what stands in for what it lacks."""

    ledger: StubLedger
    roots: tuple[Path, ...]
    shield: ImportShield

    def close(self) -> None:
        """The case is over: this process's imports and environment are its own again (the
        modules go when ``probes.loader`` purges the revision)."""
        self.shield.step_aside()

    def has_source(self, name: str) -> bool:
        """Whether the revision holds module ``name`` at all (a file or a package)."""
        relative = Path(*name.split("."))
        return any((root / relative).with_suffix(".py").is_file() or (root / relative).is_dir() for root in self.roots)

    def module(self, name: str) -> ModuleType:
        """The revision's module ``name``; raises RevisionImportError if it does not import, or
        imports only degraded (it is what the probe judges)."""
        try:
            module = importlib.import_module(name)
        except Exception as exc:
            raise RevisionImportError(f"the revision's {name!r} does not import: {_one_line(exc)}") from exc
        if name in self.ledger.degraded:
            raise RevisionImportError(f"the revision's {name!r} does not import here: {self.ledger.degraded[name]}")
        return module


def load_sglang(ctx: ProbeContext, *, stub_gpu_libraries: bool = True) -> LoadedRevision:
    """Make the revision at ``ctx.import_paths`` importable as ``sglang`` for the current case.
    Within one case (one ``probes.loader.revision`` block) it is done once. Without
    ``stub_gpu_libraries`` the installed GPU libraries are the real ones (a GPU machine checking
    the CPU kernels against the real ones)."""
    roots = tuple(Path(root).resolve() for root in ctx.import_paths)
    for finder in sys.meta_path:
        if isinstance(finder, SglangFinder) and finder.roots == roots and finder.shield is not None:
            finder.shield.arm()
            return LoadedRevision(finder.ledger, roots, finder.shield)
    _import_torch_first()
    if not _entered(roots):
        revision_loader.enter(roots)
    ledger = StubLedger()
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        del sys.modules[name]
    declared = GPU_LIBRARIES if stub_gpu_libraries else frozenset()
    stubs = (StubFinder(roots, ledger, declared, "GPU library"), StubFinder(roots, ledger, None, "missing here"))
    revision = SglangFinder(roots, ledger)
    sys.meta_path[:0] = [revision, stubs[0]]
    sys.meta_path.append(stubs[1])
    revision.shield = ImportShield(revision, stubs)
    revision.shield.arm()
    importlib.invalidate_caches()
    return LoadedRevision(ledger, roots, revision.shield)


def _entered(roots: tuple[Path, ...]) -> bool:
    return all(str(root) in sys.path for root in roots)


def _import_torch_first() -> None:
    for name in TORCH_FIRST:
        importlib.import_module(name)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]
