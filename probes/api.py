"""The probe API: a named, versioned check with parameter cases, and what it returns."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Mapping

from probes.code_hash import module_closure_hash
from probes.loader import load_package
from tracker.core.verdicts import Outcome

DEFAULT_IMPORT_ROOTS = (".",)
"""The snapshot's root: where a revision's packages are imported from unless a target says otherwise."""


class RevisionImportError(Exception):
    """The revision's package did not import: the case cannot judge it (untestable). The
    revision's own exception is the ``__cause__``."""


@dataclass(frozen=True)
class ProbeContext:
    """Where and how a probe runs: the revision's snapshot root, device, dtype and seed, and the
    directories of the snapshot (relative to its root) its packages are imported from."""

    root: Path
    device: str = "cpu"
    dtype: str = "float32"
    seed: int = 0
    import_roots: tuple[str, ...] = DEFAULT_IMPORT_ROOTS

    @property
    def is_cuda(self) -> bool:
        return self.device.startswith("cuda")

    @property
    def import_paths(self) -> tuple[Path, ...]:
        return tuple(self.root / root for root in self.import_roots)

    def import_package(self, name: str) -> ModuleType:
        """The revision's package (or module) ``name``, imported fresh for this case from the import
        roots only: a module the revision lacks is missing, even where an installed copy has it.
        Raises RevisionImportError when the revision's code does not import."""
        try:
            return load_package(name, self.import_paths)
        except Exception as exc:
            raise RevisionImportError(f"the revision's {name!r} does not import: {type(exc).__name__}: {exc}") from exc


@dataclass
class ProbeResult:
    outcome: Outcome
    metrics: dict[str, float] = field(default_factory=dict)
    signature: str | None = None
    """A short, stable description of how it failed (``cache_seqlens off by +2``); None on pass."""
    detail: str = ""

    @classmethod
    def passed(cls, **metrics: float) -> "ProbeResult":
        return cls(Outcome.PASS, dict(metrics))


@dataclass(frozen=True)
class Case:
    id: str
    params: Mapping[str, Any]
    cuda_only: bool = False


CheckFn = Callable[[ProbeContext, Mapping[str, Any]], ProbeResult]


@dataclass(frozen=True)
class Probe:
    """A check run against one revision.

    ``check(ctx, params)`` imports what it tests from the revision itself, e.g.
    ``ctx.import_package("backend")``, and judges it under one case's parameters. ``version`` is bumped by hand when the probe's meaning changes; ``code_hash`` changes with any
    edit of the module that defines the check or of a module of its package that it imports
    (``probes.code_hash``).

    ``deterministic`` declares that the result is a function of the revision and the case alone
    (no timing, no nondeterministic kernels): such a probe always runs under the same seed, so a
    rerun would repeat it exactly, and scan does not rerun its bad results to confirm them.
    """

    name: str
    version: int
    description: str
    cases: tuple[Case, ...]
    check: CheckFn
    deterministic: bool = False

    @property
    def code_hash(self) -> str:
        return module_closure_hash(inspect.getmodule(self.check))  # type: ignore[arg-type]

    def case(self, case_id: str) -> Case:
        for case in self.cases:
            if case.id == case_id:
                return case
        known = ", ".join(c.id for c in self.cases)
        raise KeyError(f"probe {self.name!r} has no case {case_id!r}; its cases: {known}")
