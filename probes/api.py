"""The probe API: a named, versioned check with parameter cases, and what it returns."""

from __future__ import annotations

import importlib
import inspect
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from probes.code_hash import module_closure_hash
from probes.loader import load_package
from tracker.core.metrics import Metric
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
    repeat: int = 1
    """Samples a metric probe takes of each metric in one execution (its ``Probe.repeat``)."""

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
    samples: dict[str, list[float]] = field(default_factory=dict)
    """A metric probe's samples, every one of them, by metric name."""

    @classmethod
    def passed(cls, **metrics: float) -> ProbeResult:
        return cls(Outcome.PASS, dict(metrics))


@dataclass(frozen=True)
class Case:
    id: str
    params: Mapping[str, Any]
    cuda_only: bool = False


CheckFn = Callable[[ProbeContext, Mapping[str, Any]], ProbeResult]


@dataclass(frozen=True)
class Probe:
    """A check run against one revision, once per case.

    ``check(ctx, params)`` imports what it tests from the revision itself, e.g.
    ``ctx.import_package("backend")``, and judges it under one case's parameters. A built-in probe
    names its check by where it lives, ``"package.module:function"``: that module imports torch and
    its helpers at the top and is imported only when a case runs, so a process that only lists or
    looks up probes loads none of it. ``requires`` names the modules the check needs besides
    regtrack's own dependencies; a probe asked for without one is refused with how to install it.

    ``version`` is bumped by hand when the probe's meaning changes; ``code_hash`` changes with any
    edit of the check's module or of a module of its package that it imports (``probes.code_hash``)
    and, for a check named by its place, with the cases' parameters.

    ``deterministic`` declares that the result is a function of the revision and the case alone
    (no timing, no nondeterministic kernels): such a probe always runs under the same seed, so a
    rerun would repeat it exactly, and scan does not rerun its bad results to confirm them.

    A metric probe declares its ``metrics`` and takes ``repeat`` samples of each per execution
    (``ctx.repeat``), returned in ``ProbeResult.samples``; the runner refuses a result that lacks
    one, and stores the median as the metric beside every sample.
    """

    name: str
    version: int
    description: str
    cases: tuple[Case, ...]
    check: CheckFn | str
    deterministic: bool = False
    requires: tuple[str, ...] = ()
    metrics: tuple[Metric, ...] = ()
    """What a metric probe measures (a timing, a throughput): each execution returns ``repeat``
    samples of each, all stored."""
    repeat: int = 1

    @property
    def check_module(self) -> str | None:
        """The name of the module that defines the check."""
        if isinstance(self.check, str):
            return self.check.partition(":")[0]
        return getattr(self.check, "__module__", None)

    def load_check(self) -> CheckFn:
        """The check function, its module imported where it is named by place."""
        if not isinstance(self.check, str):
            return self.check
        module, _, function = self.check.partition(":")
        found: CheckFn = getattr(importlib.import_module(module), function)
        return found

    @property
    def code_hash(self) -> str:
        if isinstance(self.check, str):
            return module_closure_hash(self.check.partition(":")[0], _cases_key(self.cases))
        return module_closure_hash(inspect.getmodule(self.check))  # type: ignore[arg-type]

    def case(self, case_id: str) -> Case:
        for case in self.cases:
            if case.id == case_id:
                return case
        known = ", ".join(c.id for c in self.cases)
        raise KeyError(f"probe {self.name!r} has no case {case_id!r}; its cases: {known}")


def _cases_key(cases: tuple[Case, ...]) -> bytes:
    """The cases as the check sees them, for a check whose module does not declare them."""
    described = [[case.id, dict(case.params), case.cuda_only] for case in cases]
    return json.dumps(described, sort_keys=True, default=repr).encode()
