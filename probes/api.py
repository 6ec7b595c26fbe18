"""The probe API: a named, versioned check with parameter cases, and what it returns."""

from __future__ import annotations

import hashlib
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Mapping

from tracker.core.verdicts import Outcome


@dataclass(frozen=True)
class ProbeContext:
    """Where and how a probe runs: the revision's checkout root, device, dtype and seed."""

    root: Path
    device: str = "cpu"
    dtype: str = "float32"
    seed: int = 0

    @property
    def is_cuda(self) -> bool:
        return self.device.startswith("cuda")


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


CheckFn = Callable[[ModuleType, ProbeContext, Mapping[str, Any]], ProbeResult]


@dataclass(frozen=True)
class Probe:
    """A check run against one revision's ``backend`` package.

    ``check(backend, ctx, params)`` receives the revision's freshly imported ``backend`` module.
    ``version`` is bumped by hand when the probe's meaning changes; ``code_hash`` changes with any
    edit of the module that defines the check.
    """

    name: str
    version: int
    description: str
    cases: tuple[Case, ...]
    check: CheckFn

    @property
    def code_hash(self) -> str:
        source = inspect.getsource(inspect.getmodule(self.check))  # type: ignore[arg-type]
        return hashlib.sha256(source.encode()).hexdigest()[:16]

    def case(self, case_id: str) -> Case:
        for case in self.cases:
            if case.id == case_id:
                return case
        known = ", ".join(c.id for c in self.cases)
        raise KeyError(f"probe {self.name!r} has no case {case_id!r}; its cases: {known}")
