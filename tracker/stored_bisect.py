"""A bisect answered from stored results alone, recording no session.

A second identical bisect, or a CI job asking again a question already answered, finds every result
it needs stored. ``bisect`` first tries ``answer_from_store``: the same ``Bisection`` and ``Prober``
over the store opened read-only (``Workspace.open_read_only``). At the first thing that needs a
write (a case to run, a commit not recorded) it gives up, having stored nothing and printed
nothing, and the command runs a session. An environment that only a worker can describe (a Ray
actor) is not tried: the session would start that worker anyway. A local GPU's is told by
nvidia-smi instead of a worker that imports torch (``LocalExecutor.predicts_environment``).
"""

from __future__ import annotations

from dataclasses import dataclass

from db.errors import NotStored
from probes.api import Probe
from tracker.bisect_options import BisectOptions, BisectReport, Step
from tracker.bisect_session import Bisection, StepProgress
from tracker.core.measurements import Measurement
from tracker.measure import Prober
from tracker.workspace import ExecutionOptions, Workspace


@dataclass(frozen=True)
class StoredAnswer:
    """The report, and the steps the search took, to be shown as a run's steps are."""

    report: BisectReport
    repo_id: int
    steps: list[tuple[Step, Measurement, StepProgress]]


def answer_from_store(
    ws: Workspace, probe: Probe, options: ExecutionOptions, search: BisectOptions, good: str, bad: str
) -> StoredAnswer | None:
    """The bisect of ``good..bad`` if every result it takes is stored, else None."""
    steps: list[tuple[Step, Measurement, StepProgress]] = []
    if options.executor_of(ws.config.executor) != "local":
        return None
    with options.executor(gpu_told_by_nvidia_smi=True) as executor:
        if not executor.predicts_environment(ws.target.env):
            return None
        try:
            prober = Prober.open(ws, probe, executor, "bisect", options.seed)
            session = Bisection(ws.store, ws.repo, prober, search, lambda *step: steps.append(step))
            report = session.answer(good, bad)
        except NotStored:
            return None
    return StoredAnswer(report, prober.repo_id, steps)
