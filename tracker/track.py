"""``regtrack track``: the scheduled job.

It probes the commits that arrived on the branch since the last tracked one (the first run takes
the branch head as its baseline), finds and pins down every transition among them with the scan,
stores the transitions, and judges every probe at the tracked head: failing (since which
regression, when known), untestable, or passing. Each new regression's culprit is checked: the
last commit it failed at, measured with the culprit's change undone (``tracker.verify``).
``tracker.report.ci`` writes JUnit XML, a markdown summary and JSON from the result. One job at a
time per repository and target: a lock file in the data directory, or, when the store is
PostgreSQL (shared by several hosts), an advisory lock of the database.

What the job is asked about is the tracked head: its exit status (``TrackResult.exit_status``) is
1 when a probe fails there (or flakes), else 3 when no probe could judge it, else 0. Untestable
commits between the last tracked one and the head are reported as stretches, not as a failure of
the job: the head is what a CI gate ships. The head is judged even when nothing new arrived (from
the stored results), so a head that still fails keeps failing the job.
"""

from __future__ import annotations

import fcntl
import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from db.paths import data_dir
from tracker.core.errors import UsageError
from tracker.core.records import CommitInfo, TransitionKind
from tracker.core.results import HeadVerdict, NewRegression, ScanReport, TrackResult
from tracker.core.verdicts import State, state_of
from tracker.measure import Prober
from tracker.scan import Progress, Scanner
from tracker.verify import NOT_ASKED, check_regression, scan_suspects, skipped
from tracker.workspace import Workspace

if TYPE_CHECKING:
    from db.engine import Database


@contextmanager
def track_lock(store: Database, repo_path: Path, target: str, wait: bool) -> Iterator[None]:
    key = hashlib.sha256(f"{repo_path.resolve()}\0{target}".encode()).hexdigest()[:16]
    busy = f"another `regtrack track` is running for {repo_path}"
    if store.shared:
        with store.advisory_lock(int(key[:15], 16), wait) as held:
            if not held:
                where = f"on another host or here; lock {key} of {store.where}"
                raise UsageError(f"{busy} ({where}); pass --wait to queue behind it")
            yield
        return
    path = data_dir() / "locks" / f"track-{key}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            raise UsageError(f"{busy} (lock {path}); pass --wait to queue behind it") from None
        yield


def run_track(
    ws: Workspace, branch: str, probers: list[Prober], progress: Progress | None = None, verify: bool = True
) -> TrackResult:
    """The job over ``branch`` with ``probers``: new commits scanned, transitions recorded, each new
    regression's culprit checked (unless not ``verify``), the head judged."""
    repo_id = probers[0].repo_id
    head = ws.repo.head_of(branch)
    since = ws.store.last_tracked(repo_id, ws.target.name, branch)
    result = TrackResult(ws.target.name, branch, head, since, commits=0)
    line = [head] if since is None or since == head else [since, *ws.repo.first_parent_range(since, head)]
    trees = probers[0].record_commits(line)
    if since != head:
        result.commits = len(line) - (0 if since is None else 1)
        result.scan = Scanner(ws.repo, probers, progress=progress, trigger="track").scan(line)
        result.new_transitions = ws.store.record_transitions(repo_id, ws.target.name, result.scan.transitions)
        new_shas = {(t.probe, t.sha) for t in result.new_transitions if t.kind == TransitionKind.REGRESSION}
        by_probe = {p.probe.name: p for p in probers}
        for t, bad in scan_suspects(result.scan):
            if (t.probe, t.sha) in new_shas:
                prober, commit = by_probe[t.probe], result.scan.commits[t.sha]
                measurement = prober.measure(t.sha, trees[t.sha])
                parent = commit.parents[0] if commit.parents else ""
                checked = (
                    check_regression(result.scan, prober, t, bad) if verify else skipped(t.probe, t.sha, bad, NOT_ASKED)
                )
                result.new_regressions.append(NewRegression(t, commit, measurement, parent, checked))
    result.at_head = [_at_head(ws, prober, result.scan, line[0], head, trees[head]) for prober in probers]
    ws.store.set_tracked(repo_id, ws.target.name, branch, head)
    return result


def _at_head(ws: Workspace, prober: Prober, scan: ScanReport | None, first: str, head: str, tree: str) -> HeadVerdict:
    """The probe at the head, from the store when the scan (or an earlier job) measured it."""
    measurement = prober.measure(head, tree)
    state = state_of(prober.attempt_verdicts(tree))
    culprit = _failing_since(ws, prober, scan, head) if state in (State.BAD, State.FLAKY) else None
    return HeadVerdict(prober.probe.name, state, measurement, first, culprit)


def _failing_since(ws: Workspace, prober: Prober, scan: ScanReport | None, head: str) -> CommitInfo | None:
    """The last regression of the probe before the head: the scan's last transition, else the
    newest stored transition on the head's history; None when that one is a fix, or there is none."""
    name = prober.probe.name
    if scan is not None and (found := [t for t in scan.transitions if t.probe == name]):
        return scan.commits[found[-1].sha] if found[-1].kind is TransitionKind.REGRESSION else None
    for t in reversed(ws.store.transitions(prober.repo_id, ws.target.name, name)):
        if ws.repo.is_ancestor(t.sha, head):
            return ws.store.commit(prober.repo_id, t.sha) if t.kind == TransitionKind.REGRESSION else None
    return None


def record_scan(ws: Workspace, repo_id: int, report: ScanReport) -> None:
    ws.store.record_transitions(repo_id, ws.target.name, report.transitions)
