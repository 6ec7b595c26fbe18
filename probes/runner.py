"""Run a probe's cases against one revision, turning exceptions into outcomes."""

from __future__ import annotations

import importlib.util
import traceback
import zlib
from dataclasses import dataclass, replace

from probes.api import (
    Case,
    Outcome,
    Probe,
    ProbeContext,
    ProbeResult,
    RevisionImportError,
)
from probes.loader import revision

UNTESTABLE_PREFIX = "import error"
OUT_OF_MEMORY_PREFIX = "out of memory"


def sigkill_signature(what: str) -> str:
    """A SIGKILL regtrack did not send (the OOM killer, most likely): untestable, said so."""
    return f"{OUT_OF_MEMORY_PREFIX}: {what} killed by SIGKILL (the OOM killer, or a kill from outside)"


@dataclass(frozen=True)
class CaseResult:
    case: Case
    result: ProbeResult


def case_seed(ctx: ProbeContext, case: Case) -> int:
    """A per-case seed derived from the context's, stable across processes."""
    return zlib.crc32(f"{ctx.seed}:{case.id}".encode())


def run_case(probe: Probe, case: Case, ctx: ProbeContext) -> ProbeResult:
    """One case against the revision at ``ctx.root``, its packages imported fresh from its import
    roots; never raises for the revision's faults."""
    if ctx.is_cuda and not _cuda_available():
        return ProbeResult(Outcome.SKIP, detail="CUDA device requested but none is available")
    if case.cuda_only and not ctx.is_cuda:
        return ProbeResult(Outcome.SKIP, detail="case needs a CUDA device")
    with revision(ctx.import_paths):
        try:
            return probe.check(replace(ctx, seed=case_seed(ctx, case)), case.params)
        except RevisionImportError as exc:  # the revision's code does not import: untestable
            cause = exc.__cause__ if isinstance(exc.__cause__, Exception) else exc
            return _untestable(cause, f"{UNTESTABLE_PREFIX}: {type(cause).__name__}")
        except Exception as exc:
            return _untestable(exc, f"probe raised {type(exc).__name__}")


def run_probe(probe: Probe, ctx: ProbeContext, case_ids: list[str] | None = None) -> list[CaseResult]:
    cases = probe.cases if case_ids is None else tuple(probe.case(c) for c in case_ids)
    return [CaseResult(case, run_case(probe, case, ctx)) for case in cases]


_PRECEDENCE = (Outcome.FAIL, Outcome.CRASH, Outcome.TIMEOUT, Outcome.ERROR, Outcome.PASS, Outcome.SKIP)


def summarize(results: list[CaseResult]) -> ProbeResult:
    """One verdict for a probe: any failing case fails it; metrics are the worst over cases."""
    if not results:
        return ProbeResult(Outcome.SKIP, detail="no cases")
    outcome = min((r.result.outcome for r in results), key=_PRECEDENCE.index)
    metrics: dict[str, float] = {}
    for r in results:
        for key, value in r.result.metrics.items():
            metrics[key] = max(metrics.get(key, value), value)
    signatures = [r.result.signature for r in results if r.result.outcome is outcome and r.result.signature]
    signature = "; ".join(dict.fromkeys(signatures)) or None
    return ProbeResult(outcome, metrics, signature)


def _untestable(exc: Exception, signature: str) -> ProbeResult:
    """ERROR: the case could not judge the revision. Running out of memory (host or CUDA) is said
    so, and is untestable like any other error: it depends on the machine, not only on the revision."""
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        signature = f"{OUT_OF_MEMORY_PREFIX}: {type(exc).__name__}"
    return ProbeResult(Outcome.ERROR, signature=signature, detail=_last_lines(exc))


def _cuda_available() -> bool:
    """torch's answer where torch is installed; without it the worker's device check (nvidia-smi) stands."""
    if importlib.util.find_spec("torch") is None:
        return True
    import torch

    return torch.cuda.is_available()


def _last_lines(exc: BaseException, lines: int = 6) -> str:
    return "".join(traceback.format_exception(exc)[-lines:]).strip()
