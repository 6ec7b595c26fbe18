"""Stand-ins for the third-party modules a revision's sglang code imports and this machine lacks.

A stub module answers every attribute with a stub class, which can be called, subclassed,
indexed, assigned into, used as a decorator or in a type annotation, so that module bodies run.
While a module body of the revision runs (import time) a call on a stub is answered with another
stub. Once the probe runs, a call on a stub, or a launch of a kernel that a stub decorated
(``@triton.jit``), means the probe reached code that cannot run here: the ledger records it and
raises :class:`StubReached`, and the case is untestable.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib.machinery import ModuleSpec
from typing import Any

RAISING_ATTRIBUTES = frozenset({"triton.runtime.driver.active"})
"""Attributes that raise AttributeError instead of answering a stub: code that asks them probes
for a live device and must see that there is none."""


class StubReached(BaseException):
    """A stub was called while the probe ran. A BaseException, so that the revision's own
    ``except Exception`` cannot swallow it; the probe turns it into an ERROR."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


@dataclass
class StubLedger:
    """What a revision's import put in place of real code, and which of it the probe reached."""

    modules: dict[str, str] = field(default_factory=dict)
    """Stub module name -> why it is a stub (a declared GPU library, missing, an alias)."""
    degraded: dict[str, str] = field(default_factory=dict)
    """Revision module whose body raised -> the error; its names defined before the error are kept."""
    substituted: dict[str, str] = field(default_factory=dict)
    """``module.function`` of the revision -> the CPU version that replaced it."""
    reached: list[str] = field(default_factory=list)
    """Stubs called while the probe ran, in order."""
    importing: int = 0
    """Depth of revision module bodies executing now."""

    @contextmanager
    def module_body(self) -> Iterator[None]:
        self.importing += 1
        try:
            yield
        finally:
            self.importing -= 1

    def reach(self, name: str) -> None:
        """Record that the probe reached the stub ``name`` and stop it there."""
        self.reached.append(name)
        raise StubReached(name)

    def summary(self) -> str:
        """One line per kind, for a ProbeResult's detail."""
        parts = []
        for why in sorted(set(self.modules.values())):
            tops = sorted({name.partition(".")[0] for name, reason in self.modules.items() if reason == why})
            count = sum(reason == why for reason in self.modules.values())
            parts.append(f"stubbed ({why}): {count} modules of {', '.join(tops)}")
        if self.degraded:
            parts.append(
                f"degraded modules ({len(self.degraded)}): "
                + "; ".join(f"{name} ({why})" for name, why in sorted(self.degraded.items()))
            )
        if self.substituted:
            parts.append("CPU kernels: " + ", ".join(f"{k} -> {v}" for k, v in sorted(self.substituted.items())))
        return "\n".join(parts)

    def metrics(self) -> dict[str, float]:
        return {
            "stub_modules": float(len(self.modules)),
            "degraded_modules": float(len(self.degraded)),
            "cpu_kernels": float(len(self.substituted)),
        }


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _decorates(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """A call shaped like applying a decorator: one function or class, nothing else."""
    if kwargs or len(args) != 1:
        return False
    target = args[0]
    return inspect.isfunction(target) or inspect.isclass(target) or isinstance(target, Decorated)


def _child_name(parent: str, name: str) -> str:
    child = f"{parent}.{name}"
    if child in RAISING_ATTRIBUTES:
        raise AttributeError(f"{child} is a stub that reports no device")
    return child


class _StubMeta(type):
    """The metaclass of stub classes: attribute chains, calls, indexing on the class itself."""

    __stub_name__: str
    __stub_ledger__: StubLedger

    def __getattr__(cls, name: str) -> Any:
        if _is_dunder(name):
            raise AttributeError(name)
        child = stub_class(_child_name(cls.__stub_name__, name), cls.__stub_ledger__)
        type.__setattr__(cls, name, child)
        return child

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        ledger = cls.__stub_ledger__
        if "__stub_root__" in cls.__dict__:
            if not ledger.importing:
                ledger.reach(cls.__stub_name__)
            if _decorates(args, kwargs):
                return decorate(args[0], cls.__stub_name__, ledger)
            return stub_class(f"{cls.__stub_name__}()", ledger)
        if not ledger.importing and cls.__init__ is _StubObject.__init__:  # type: ignore[misc]  # cls is a class
            ledger.reach(f"{cls.__stub_name__} (constructing {cls.__qualname__})")
        return super().__call__(*args, **kwargs)

    def __getitem__(cls, key: Any) -> Any:
        items = cls.__dict__.get("__stub_items__")
        if items is not None and _hashable(key) and key in items:
            return items[key]
        return stub_class(f"{cls.__stub_name__}[]", cls.__stub_ledger__)

    def __setitem__(cls, key: Any, value: Any) -> None:
        if "__stub_items__" not in cls.__dict__:
            type.__setattr__(cls, "__stub_items__", {})
        if _hashable(key):
            cls.__dict__["__stub_items__"][key] = value

    def __contains__(cls, key: Any) -> bool:
        items = cls.__dict__.get("__stub_items__") or {}
        return _hashable(key) and key in items

    def __iter__(cls) -> Iterator[Any]:
        return iter(())

    def __repr__(cls) -> str:
        return f"<stub {cls.__stub_name__}>"


def _hashable(key: Any) -> bool:
    try:
        hash(key)
    except TypeError:
        return False
    return True


class _StubObject(metaclass=_StubMeta):
    """Base of every stub class, so that a revision's class may derive from one."""

    __stub_name__ = "<stub>"
    __stub_ledger__ = StubLedger()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        for key, value in kwargs.items():
            object.__setattr__(self, key, value)

    def __getattr__(self, name: str) -> Any:
        if _is_dunder(name):
            raise AttributeError(name)
        return stub_class(_child_name(type(self).__stub_name__, name), type(self).__stub_ledger__)


def stub_class(name: str, ledger: StubLedger) -> type:
    """A fresh stub standing for the attribute ``name`` of a stub module."""
    short = name.rpartition(".")[2] or name
    namespace = {
        "__stub_name__": name,
        "__stub_ledger__": ledger,
        "__stub_root__": True,
        "__module__": name.partition(".")[0],
    }
    return _StubMeta(short.replace("()", "").replace("[]", "") or "stub", (_StubObject,), namespace)


def decorate(target: Any, via: str, ledger: StubLedger) -> Any:
    """What a stub decorator gives back: a class stays itself (the decorator's effect is lost,
    the class still works); a function becomes a :class:`Decorated` that only a probe run reaches."""
    if inspect.isclass(target) or isinstance(target, Decorated):
        return target
    return Decorated(target, via, ledger)


class Decorated:
    """A function a stub decorated, e.g. a ``@triton.jit`` kernel: calling it, or launching it
    (``kernel[grid](...)``) while the probe runs, reaches the stub."""

    def __init__(self, target: Any, via: str, ledger: StubLedger) -> None:
        self.__wrapped__ = target
        self.__name__ = getattr(target, "__name__", "kernel")
        self.__qualname__ = getattr(target, "__qualname__", self.__name__)
        self.__module__ = getattr(target, "__module__", "?")
        self.__doc__ = getattr(target, "__doc__", None)
        self._via = via
        self._ledger = ledger

    @property
    def qualified_name(self) -> str:
        return f"{self.__module__}.{self.__qualname__}"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self._ledger.importing:
            self._ledger.reach(f"{self.qualified_name} (through {self._via})")
        if _decorates(args, kwargs):
            return self
        return stub_class(f"{self._via}()", self._ledger)

    def __getitem__(self, grid: Any) -> Any:
        return _Launch(self)

    def __getattr__(self, name: str) -> Any:
        if _is_dunder(name):
            raise AttributeError(name)
        return stub_class(f"{self._via}.{name}", self._ledger)

    def __repr__(self) -> str:
        return f"<stub-decorated {self.qualified_name} via {self._via}>"


class _Launch:
    def __init__(self, kernel: Decorated) -> None:
        self.kernel = kernel

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        self.kernel._ledger.reach(f"triton kernel {self.kernel.qualified_name}")


class StubModule(types.ModuleType):
    """A module of stubs; a package, so that its submodules import as stubs too."""

    def __init__(self, name: str, ledger: StubLedger, spec: ModuleSpec | None = None) -> None:
        super().__init__(name)
        self.__path__: list[str] = []
        self.__spec__ = spec
        self.__stub_ledger__ = ledger

    def __getattr__(self, name: str) -> Any:
        if _is_dunder(name):
            raise AttributeError(name)
        child = stub_class(_child_name(self.__name__, name), self.__stub_ledger__)
        setattr(self, name, child)
        return child


class DegradedModule(StubModule):
    """A revision module whose body raised here: the names it defined before the error are real,
    every other name is a stub."""

    def __init__(self, broken: types.ModuleType, ledger: StubLedger) -> None:
        super().__init__(broken.__name__, ledger, broken.__spec__)
        kept = {key: value for key, value in vars(broken).items() if key != "__path__"}
        self.__dict__.update(kept)
        if hasattr(broken, "__path__"):
            self.__path__ = list(broken.__path__)
