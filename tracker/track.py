"""``regtrack track``: the scheduled job.

It probes the commits that arrived on the branch since the last tracked one (the first run takes
the branch head as its baseline), finds and pins down every transition among them with the scan,
stores the transitions, and judges every probe at the tracked head: failing (since which
regression, when known), untestable, or passing. ``tracker.report.ci`` writes JUnit XML, a
markdown summary and JSON from the result. One job at a time per repository and target: a lock
file in the data directory, or, when the store is PostgreSQL (shared by several hosts), an
advisory lock of the database.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from db.paths import data_dir
from tracker.core.errors import UsageError
from tracker.core.records import CommitInfo, TransitionRecord
from tracker.core.verdicts import Verdict
from tracker.execution.executors import Executor
from tracker.measure import Measurement, Prober
from tracker.report.ci import ExitStatus, exit_status
from tracker.scan import Progress, Scanner, ScanReport, ScanTransition, state_of
from tracker.search.transitions import Kind, State
from tracker.workspace import Workspace

if TYPE_CHECKING:
    from db.engine import Database


@dataclass(frozen=True)
class NewRegression:
    transition: ScanTransition
    measurement: Measurement
    parent: str


@dataclass(frozen=True)
class HeadVerdict:
    """A probe at the tracked head: its state over the head tree's stored attempts, its latest
    measurement, and the regression it has failed since (None when it passes, or when no
    regression before the head is known: it failed already at ``first``, the oldest commit the
    job looked at)."""

    probe: str
    state: State
    measurement: Measurement
    first: str
    culprit: CommitInfo | None = None

    @property
    def failing(self) -> bool:
        """A flaky head fails some of its runs: for a gate, as failing as a bad one."""
        return self.state in (State.BAD, State.FLAKY)

    @property
    def verdict(self) -> Verdict:
        if self.failing:
            return Verdict.BAD
        return Verdict.GOOD if self.state is State.GOOD else Verdict.SKIP

    @property
    def failing_since(self) -> str:
        """The JUnit message: since the culprit, or since ``first`` or earlier when none is known."""
        if self.culprit is not None:
            return f"failing since {self.culprit.sha[:12]}"
        return f"failing since {self.first[:12]} or earlier"

    def to_json(self) -> dict[str, Any]:
        return {
            "probe": self.probe,
            "state": self.state.value,
            "verdict": self.verdict.value,
            "signature": self.measurement.signature,
            "failing_since": self.culprit.sha if self.culprit and self.failing else None,
            "first": self.first,
        }


@dataclass
class TrackResult:
    target: str
    branch: str
    head: str
    since: str | None
    commits: int
    scan: ScanReport | None = None
    new_regressions: list[NewRegression] = field(default_factory=list)
    new_transitions: list[TransitionRecord] = field(default_factory=list)
    at_head: list[HeadVerdict] = field(default_factory=list)

    @property
    def exit_status(self) -> ExitStatus:
        return exit_status({self.head: [h.verdict for h in self.at_head]})

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "branch": self.branch,
            "head": self.head,
            "since": self.since,
            "commits": self.commits,
            "executions": self.scan.executions if self.scan else 0,
            "transitions": self.scan.to_json()["transitions"] if self.scan else [],
            "new_regressions": [
                {
                    **r.transition.to_json(),
                    "signature": r.measurement.signature,
                    "metrics": r.measurement.metrics,
                    "parent": r.parent,
                }
                for r in self.new_regressions
            ],
            "at_head": [h.to_json() for h in self.at_head],
            "exit_status": int(self.exit_status),
        }


@contextmanager
def track_lock(store: Database, repo_path: Path, target: str, wait: bool) -> Iterator[None]:
    key = hashlib.sha256(f"{repo_path.resolve()}\0{target}".encode()).hexdigest()[:16]
    busy = f"another `regtrack track` is running for {repo_path}"
    if store.shared:
        with store.advisory_lock(int(key[:15], 16), wait) as held:
            if not held:
                raise UsageError(f"{busy} (on another host or here; lock {key} of {store.where}); pass --wait to queue behind it")
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
    ws: Workspace, branch: str, executor: Executor, seed: int | None, probers: list[Prober], progress: Progress | None = None
) -> TrackResult:
    repo_id = probers[0].repo_id
    head = ws.repo.head_of(branch)
    since = ws.store.last_tracked(repo_id, ws.target.name, branch)
    result = TrackResult(ws.target.name, branch, head, since, commits=0)
    line = [head] if since is None or since == head else [since, *ws.repo.first_parent_range(since, head)]
    trees = probers[0].record_commits(line)
    if since != head:
        result.commits = len(line) - (0 if since is None else 1)
        result.scan = Scanner(ws.repo, probers, progress=progress).scan(line)
        records = [_record(t, "track") for t in result.scan.transitions]
        result.new_transitions = ws.store.record_transitions(repo_id, ws.target.name, records)
        new_shas = {(t.probe, t.sha) for t in result.new_transitions if t.kind == Kind.REGRESSION.value}
        by_probe = {p.probe.name: p for p in probers}
        for t in result.scan.transitions:
            if (t.probe, t.commit.sha) in new_shas:
                measurement = by_probe[t.probe].measure(t.commit.sha, trees[t.commit.sha])
                result.new_regressions.append(NewRegression(t, measurement, t.commit.parents[0] if t.commit.parents else ""))
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
    found = [t for t in scan.transitions if t.probe == name] if scan else []
    if found:
        return found[-1].commit if found[-1].kind is Kind.REGRESSION else None
    for t in reversed(ws.store.transitions(prober.repo_id, ws.target.name, name)):
        if ws.repo.is_ancestor(t.sha, head):
            return ws.store.commit(prober.repo_id, t.sha) if t.kind == Kind.REGRESSION.value else None
    return None


def _record(t: ScanTransition, trigger: str) -> TransitionRecord:
    return TransitionRecord(
        probe=t.probe,
        sha=t.commit.sha,
        kind=t.kind.value,  # type: ignore[arg-type]
        pairs_with=t.pair.sha if t.pair else None,
        pair_kind=t.pair.kind if t.pair else None,
        candidates=t.candidates,
        authored_at=t.commit.authored_at,
        trigger=trigger,
    )


def record_scan(ws: Workspace, repo_id: int, report: ScanReport) -> None:
    ws.store.record_transitions(repo_id, ws.target.name, [_record(t, "scan") for t in report.transitions])
