"""The Python API of ``regtrack compare``: each probe at two revisions side by side, measured as
``regtrack run`` measures (stored results reused), ranked by ``tracker.core.comparison``."""

from __future__ import annotations

from tracker.core.comparison import CaseAt, Comparison, ProbeAt, ProbePair, Provenance
from tracker.core.errors import UsageError
from tracker.core.measurements import Measurement
from tracker.core.records import CommitInfo
from tracker.execution.executors import Executor
from tracker.measure import Prober
from tracker.probing import DEFAULT_EXECUTION, QUIET, Selection, Watch, measure_each, measured_with, probes_of
from tracker.workspace import ExecutionOptions, Workspace


def compare(
    selection: Selection, a: str, b: str, options: ExecutionOptions = DEFAULT_EXECUTION, watch: Watch = QUIET
) -> Comparison:
    """Each probe at revisions ``a`` and ``b``; what is stored is reused, what is missing runs.
    Two names of one commit are a usage error: there would be nothing to compare."""
    with Workspace.open(selection.repo, selection.target) as opened:
        sha_a, sha_b = opened.repo.resolve(a), opened.repo.resolve(b)
        if sha_a == sha_b:
            raise UsageError(f"{a!r} and {b!r} are the same commit {sha_a[:12]}; compare two different revisions")
        ws, probes = probes_of(opened, selection)
        watch.started("compare")

        def compared(executor: Executor) -> Comparison:
            probers = [Prober.open(ws, p, executor, "compare", options.seed, selection.fresh) for p in probes]
            measured = [m for _, m in measure_each(ws, probers, [sha_a, sha_b], watch)]
            pairs = [
                ProbePair(prober.probe.name, _probe_at(at_a), _probe_at(at_b))
                for prober, at_a, at_b in zip(probers, measured[::2], measured[1::2], strict=True)
            ]
            repo_id = probers[0].repo_id
            return Comparison(_commit(ws, repo_id, sha_a), _commit(ws, repo_id, sha_b), tuple(pairs))

        return measured_with(ws, options, watch, compared)


def _probe_at(measurement: Measurement) -> ProbeAt:
    cases = {c.case_id: CaseAt(c.outcome, c.signature, dict(c.metrics), c.duration_s) for c in measurement.cases}
    source = Provenance.REUSED if measurement.reused else Provenance.MEASURED
    return ProbeAt(measurement.sha, measurement.verdict, source, cases)


def _commit(ws: Workspace, repo_id: int, sha: str) -> CommitInfo:
    """The commit as the probers recorded it."""
    commit = ws.store.commit(repo_id, sha)
    assert commit is not None, "the probers record every commit they measure"
    return commit
