"""Run a probe's cases against one revision, turning exceptions into outcomes."""

from __future__ import annotations

import math
import statistics
import traceback
import zlib
from dataclasses import dataclass, replace
from pathlib import Path

from probes.api import (
    Case,
    Probe,
    ProbeContext,
    ProbeResult,
    RevisionImportError,
)
from probes.loader import revision
from probes.requirements import installed
from tracker.core.verdicts import Outcome

UNTESTABLE_PREFIX = "import error"
OUT_OF_MEMORY_PREFIX = "out of memory"
CGROUP_MOUNT = Path("/sys/fs/cgroup")
V2_OOM_COUNTERS = ((CGROUP_MOUNT, "memory.events"), (CGROUP_MOUNT / "unified", "memory.events"))
V1_OOM_COUNTERS = ((CGROUP_MOUNT / "memory", "memory.oom_control"),)
"""Where a cgroup's count of OOM kills may be (a mount, a file in the cgroup's directory under it):
a line ``oom_kill N`` in each."""


def sigkill_signature(what: str, confirmed: bool) -> str:
    """A SIGKILL regtrack did not send: untestable. Out of memory outright where the kernel counted
    an OOM kill (``OomWatch``); otherwise likely, but it may be a ``kill -9`` from outside."""
    if confirmed:
        return f"{OUT_OF_MEMORY_PREFIX}: {what} killed by SIGKILL (the kernel's OOM killer)"
    return f"{what} killed by SIGKILL, {OUT_OF_MEMORY_PREFIX}?"


class OomWatch:
    """The kernel's count of OOM kills in the cgroup ``pid`` (default: this process) runs in, read
    now; ``rose()`` tells whether the OOM killer struck there since. Where no count can be read
    (no cgroup filesystem, the root cgroup) it never rose."""

    def __init__(self, pid: int | None = None) -> None:
        self._counter = _oom_kill_counter(pid)
        self._before = _oom_kills(self._counter)

    def rose(self) -> bool:
        after = _oom_kills(self._counter)
        return self._before is not None and after is not None and after > self._before


def _oom_kill_counter(pid: int | None) -> Path | None:
    """The file counting OOM kills in ``pid``'s cgroup (v2, or v1's memory controller)."""
    try:
        lines = Path(f"/proc/{pid or 'self'}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        candidates = (
            V2_OOM_COUNTERS if not controllers else V1_OOM_COUNTERS if "memory" in controllers.split(",") else ()
        )
        for mount, name in candidates:
            counter = mount / path.strip("/") / name
            if counter.is_file():
                return counter
    return None


def _oom_kills(counter: Path | None) -> int | None:
    if counter is None:
        return None
    try:
        lines = counter.read_text().splitlines()
    except OSError:
        return None
    counts = [int(line.split()[1]) for line in lines if line.startswith("oom_kill ")]
    return counts[0] if counts else None


@dataclass(frozen=True)
class CaseResult:
    case: Case
    result: ProbeResult


def case_seed(ctx: ProbeContext, case: Case) -> int:
    """A per-case seed derived from the context's, stable across processes."""
    return zlib.crc32(f"{ctx.seed}:{case.id}".encode())


def run_case(probe: Probe, case: Case, ctx: ProbeContext) -> ProbeResult:
    """One case against the revision at ``ctx.root``, its packages imported fresh from its import
    roots; never raises for the revision's faults. The check's own module is imported first, from
    regtrack's installation, before the revision's roots go on ``sys.path``."""
    if ctx.is_cuda and not _cuda_available():
        return ProbeResult(Outcome.SKIP, detail="CUDA device requested but none is available")
    if case.cuda_only and not ctx.is_cuda:
        return ProbeResult(Outcome.SKIP, detail="case needs a CUDA device")
    try:
        check = probe.load_check()
    except Exception as exc:
        return _untestable(exc, f"probe raised {type(exc).__name__}")
    with revision(ctx.import_paths):
        try:
            result = check(replace(ctx, seed=case_seed(ctx, case), repeat=probe.repeat), case.params)
            return with_samples(probe, result)
        except RevisionImportError as exc:  # the revision's code does not import: untestable
            cause = exc.__cause__ if isinstance(exc.__cause__, Exception) else exc
            return _untestable(cause, f"{UNTESTABLE_PREFIX}: {type(cause).__name__}")
        except Exception as exc:
            return _untestable(exc, f"probe raised {type(exc).__name__}")


def with_samples(probe: Probe, result: ProbeResult) -> ProbeResult:
    """A metric probe's judged result with each metric's median among its metrics; one that lacks
    samples it declared is the probe's error (untestable), never a measurement."""
    if not probe.metrics or result.outcome not in (Outcome.PASS, Outcome.FAIL):
        return result
    medians = {}
    for metric in probe.metrics:
        taken = result.samples.get(metric.name, [])
        if len(taken) != probe.repeat or not all(value > 0 and math.isfinite(value) for value in taken):
            return ProbeResult(
                Outcome.ERROR,
                signature=f"metric probe error: {metric.name} has {len(taken)} positive finite samples, "
                f"{probe.repeat} declared",
            )
        medians[metric.name] = statistics.median(taken)
    return replace(result, metrics={**result.metrics, **medians})


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


def ended_case(exc: SystemExit | KeyboardInterrupt) -> ProbeResult:
    """CRASH: a probe that tried to end the worker (``sys.exit``, ``SystemExit``, Ctrl-C) misbehaved
    as surely as one that crashed it; run where no one can press Ctrl-C (a worker), so the
    interrupt is the probe's own."""
    if isinstance(exc, KeyboardInterrupt):
        return ProbeResult(Outcome.CRASH, signature="probe raised KeyboardInterrupt", detail=_last_lines(exc))
    return ProbeResult(
        Outcome.CRASH, signature=f"probe exited with status {_exit_status(exc)}", detail=_last_lines(exc)
    )


def _exit_status(exc: SystemExit) -> int:
    """The status Python would exit with: none is 0, a message 1."""
    if exc.code is None:
        return 0
    return exc.code if isinstance(exc.code, int) else 1


def _untestable(exc: Exception, signature: str) -> ProbeResult:
    """ERROR: the case could not judge the revision. Running out of memory (host or CUDA) is said
    so, and is untestable like any other error: it depends on the machine, not only on the revision."""
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        signature = f"{OUT_OF_MEMORY_PREFIX}: {type(exc).__name__}"
    return ProbeResult(Outcome.ERROR, signature=signature, detail=_last_lines(exc))


def _cuda_available() -> bool:
    """torch's answer where torch is installed; without it the worker's device check (nvidia-smi) stands."""
    if not installed("torch"):
        return True
    import torch

    return torch.cuda.is_available()


def _last_lines(exc: BaseException, lines: int = 6) -> str:
    return "".join(traceback.format_exception(exc)[-lines:]).strip()
