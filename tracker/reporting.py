"""Stored facts as a ``ReportData``: what ``regtrack report`` renders. Nothing is run, no probe is loaded.

A probe's result belongs to a target tree, not to a commit (see ``tracker.measure``): every commit
of the line shows the runs of its tree, wherever they were run, in its cells and in the metric
series (``tracker.report.series``). The work stays proportional to the line: one git process each
for its commits' metadata and tree hashes, one query for its runs (and one, chunked, for which of
them were copied by read reuse), and one query per bisect session for its steps.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime

from tracker.core.records import RunRow, SessionRow, StepRow, StretchRecord, stretch_kind
from tracker.core.verdicts import BAD_OUTCOMES, Outcome, State, state_of, verdict_of
from tracker.core.verification import Verification
from tracker.queries import check_filters, filter_runs
from tracker.report.model import Cell, CellState, ReportBisect, ReportData
from tracker.report.series import device_label, line_series
from tracker.search.transitions import find_transitions
from tracker.targets.reuse import attempt_settings
from tracker.workspace import Workspace

CELL_STATE: dict[State, CellState] = {State.GOOD: "pass", State.BAD: "fail", State.SKIP: "skip", State.FLAKY: "flaky"}
STATE_OF_CELL = {cell: state for state, cell in CELL_STATE.items()}
# The outcomes whose signatures explain a cell: what failed, or what made it untestable.
SIGNATURE_OUTCOMES: dict[CellState, frozenset[Outcome]] = {
    "fail": BAD_OUTCOMES,
    "flaky": BAD_OUTCOMES,
    "skip": frozenset({Outcome.ERROR, Outcome.SKIP}),
}
AttemptKey = tuple[str, int, str, int]  # environment fingerprint, probe version, settings, attempt number


def _default_probes(ws: Workspace, repo_id: int) -> tuple[str, ...]:
    """The target's probes; for a repository without any (probed by ``--command``), every probe stored for it."""
    if ws.target.probes:
        return ws.target.probes
    return tuple(ws.store.probe_names(repo_id))


def build_report(
    ws: Workspace, range_spec: str | None, probe_names: tuple[str, ...], environment: str | None
) -> ReportData:
    """``range_spec`` as ``regtrack scan`` takes it (default: the target's branch); ``probe_names``
    and ``environment`` as ``regtrack history --probe`` and ``--env`` take them, each a probe or
    environment stored for the repository (``UsageError`` otherwise; default: the target's probes,
    runs of every environment)."""
    repo_id = ws.store.repository(ws.repo.path)
    check_filters(ws.store, repo_id, probe_names, environment)
    line = ws.repo.line(range_spec or ws.target.branch)
    probes = probe_names or _default_probes(ws, repo_id)
    trees = ws.repo.tree_hashes(line, ws.target.paths)
    runs = [r for r in ws.store.runs(repo_id=repo_id, trees=sorted(set(trees.values()))) if r.probe_name in probes]
    if environment is not None:
        runs = filter_runs(runs, environment=environment)
    cells = _line_cells(line, trees, probes, runs)
    on_line = set(line)
    shown = None if environment is None else {r.fingerprint for r in runs}
    environments = ws.store.environments(repo_id)
    copies = ws.store.copied_from([r.id for r in runs if r.sha in on_line])
    return ReportData(
        repository=f"{ws.repo.path.name} (target {ws.target.name})",
        generated_at=datetime.now(UTC),
        probes=probes,
        commits=tuple(ws.repo.commit_infos(line)),
        cells=cells,
        transitions=tuple(
            t for t in ws.store.transitions(repo_id, ws.target.name) if t.sha in on_line and t.probe in probes
        ),
        stretches=_stretches(line, probes, cells),
        bisects=tuple(
            _bisect(s, ws.store.steps(s.id))
            for s in ws.store.sessions(repo_id, ws.target.name)
            if s.probe_name in probes
        ),
        environments=tuple(info for fingerprint, info in environments if shown is None or fingerprint in shown),
        measured=frozenset(r.sha for r in runs if r.id not in copies),
        series=line_series(line, trees, runs, {f: device_label(info) for f, info in environments}, set(copies)),
    )


def _line_cells(
    line: Sequence[str], trees: Mapping[str, str], probes: Sequence[str], runs: Iterable[RunRow]
) -> dict[tuple[str, str], Cell]:
    """Each commit's cell is its tree's, so a commit that was never measured itself still shows one."""
    by_tree = _tree_cells(runs)
    return {(sha, p): by_tree[(trees[sha], p)] for sha in line for p in probes if (trees[sha], p) in by_tree}


def _tree_cells(runs: Iterable[RunRow]) -> dict[tuple[str, str], Cell]:
    """The cell of each (tree, probe) with runs. An attempt is one round of cases, judged as
    ``Prober.attempt_verdicts`` judges it; attempts in different environments, probe versions or
    settings are kept apart, so results that disagree across them show as flaky."""
    attempts: dict[tuple[str, str], dict[AttemptKey, list[RunRow]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        key = (run.fingerprint, run.probe_version, attempt_settings(run.settings_key), run.attempt)
        attempts[(run.tree_hash, run.probe_name)][key].append(run)
    return {key: _cell(list(rounds.values())) for key, rounds in attempts.items()}


def _cell(attempts: Sequence[Sequence[RunRow]]) -> Cell:
    state = CELL_STATE[state_of([verdict_of(run.outcome for run in attempt) for attempt in attempts])]
    wanted = SIGNATURE_OUTCOMES.get(state, frozenset())
    found = [run.signature for attempt in attempts for run in attempt if run.outcome in wanted and run.signature]
    return Cell(state, "; ".join(dict.fromkeys(found)) or None, runs=len(attempts))


def _stretches(
    line: Sequence[str], probes: Sequence[str], cells: Mapping[tuple[str, str], Cell]
) -> tuple[StretchRecord, ...]:
    """Untestable and flaky stretches of each probe over its measured commits, as the scan finds them."""
    found: list[StretchRecord] = []
    for probe in probes:
        measured = [(sha, STATE_OF_CELL[cells[(sha, probe)].state]) for sha in line if (sha, probe) in cells]
        for s in find_transitions([state for _, state in measured])[1]:
            found.append(StretchRecord(probe, stretch_kind(s.kind), measured[s.first][0], measured[s.last][0]))
    return tuple(found)


def _bisect(session: SessionRow, steps: Sequence[StepRow]) -> ReportBisect:
    """Culprit and candidates as ``BisectReport.to_json`` stores them; a failed session stores its error."""
    result = session.result or {}
    status = f"{session.status}: {result['error']}" if "error" in result else session.status
    return ReportBisect(
        session_id=session.id,
        probe=session.probe_name,
        good=session.good_sha,
        bad=session.bad_sha,
        status=status,
        culprit=result.get("culprit"),
        candidates=tuple(result.get("candidates", ())),
        steps=tuple(steps),
        strategy=session.strategy,
        confidence=result.get("confidence"),
        find_fix=bool(((session.options or {}).get("search") or {}).get("find_fix")),
        verification=Verification.from_json(result["verification"]) if result.get("verification") else None,
    )
