"""Measure revisions with one probe: stored results first, the executor for the rest.

A measurement is keyed by the tree of the target's paths, not by the commit: a commit that only
touches files outside those paths reuses its parent's result, and nothing measured in this
environment with this probe version is ever run again. Each case's result is stored the moment
it arrives, so an interrupted command loses at most the cases in flight.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from db.store import RunRecord, Store, StoredRun
from probes.api import Outcome, Probe

from .config import Target
from .executors import Job, LocalExecutor
from .revisions import Repo
from .snapshots import SnapshotCache
from .verdicts import Verdict, verdict_of


@dataclass(frozen=True)
class CaseOutcome:
    case_id: str
    outcome: Outcome
    signature: str | None
    metrics: dict[str, float]


@dataclass(frozen=True)
class Measurement:
    sha: str
    tree_hash: str
    verdict: Verdict
    cases: tuple[CaseOutcome, ...]
    reused: bool

    @property
    def signature(self) -> str | None:
        """The failing cases' signatures, or the untestable ones' when nothing failed."""
        wanted = {Verdict.BAD: {Outcome.FAIL, Outcome.CRASH, Outcome.TIMEOUT}, Verdict.SKIP: {Outcome.ERROR}}
        found = [c.signature for c in self.cases if c.outcome in wanted.get(self.verdict, set()) and c.signature]
        return "; ".join(dict.fromkeys(found)) or None

    @property
    def metrics(self) -> dict[str, float]:
        """The worst value of each metric over the cases."""
        worst: dict[str, float] = {}
        for case in self.cases:
            for key, value in case.metrics.items():
                worst[key] = max(worst.get(key, value), value)
        return worst


class Prober:
    """Measures revisions of one target with one probe in one environment."""

    def __init__(
        self,
        store: Store,
        repo: Repo,
        target: Target,
        probe: Probe,
        executor: LocalExecutor,
        snapshots: SnapshotCache,
        trigger: str,
        seed: int | None = None,
    ) -> None:
        self.store, self.repo, self.target, self.probe = store, repo, target, probe
        self.executor, self.snapshots, self.trigger, self.seed = executor, snapshots, trigger, seed
        self.repo_id = store.repository(repo.path)
        self.probe_id = store.probe_version(probe.name, probe.version, probe.code_hash)
        self.environment_id = store.environment(executor.environment())
        self.paths_key = ",".join(target.paths)
        self.executions = 0
        self.reused = 0

    def record_commits(self, shas: list[str]) -> dict[str, str]:
        """Store the commits' metadata and target trees; returns each one's tree hash."""
        self.store.record_commits(self.repo_id, self.repo.commit_infos(shas))
        trees = self.repo.tree_hashes(shas, self.target.paths)
        for sha, tree in trees.items():
            self.store.record_tree(self.repo_id, sha, self.paths_key, tree)
        return trees

    def stored(self, tree_hash: str) -> dict[str, StoredRun]:
        """The latest stored run of each case of this probe for ``tree_hash``."""
        latest: dict[str, StoredRun] = {}
        for run in self.store.runs_for_tree(tree_hash, self.probe_id, self.environment_id):
            if run.case_id not in latest or run.id > latest[run.case_id].id:
                latest[run.case_id] = run
        return latest

    def attempt_verdicts(self, tree_hash: str) -> list[Verdict]:
        """The verdict of each stored attempt at ``tree_hash``, oldest first: reruns that disagree
        show a flaky result."""
        by_attempt: dict[int, list[Outcome]] = {}
        for run in self.store.runs_for_tree(tree_hash, self.probe_id, self.environment_id):
            by_attempt.setdefault(run.attempt, []).append(run.outcome)
        return [verdict_of(outcomes) for _, outcomes in sorted(by_attempt.items())]

    def measure(
        self,
        sha: str,
        tree_hash: str,
        session_id: int | None = None,
        on_case: Callable[[CaseOutcome], None] | None = None,
        rerun: bool = False,
    ) -> Measurement:
        """Stored results when every case has one (unless ``rerun``), else run what is missing."""
        known = {} if rerun else self.stored(tree_hash)
        missing = [case for case in self.probe.cases if case.id not in known]
        cases = {case_id: _case_outcome(run) for case_id, run in known.items()}
        if missing:
            root = self.snapshots.materialise(self.repo, sha, self.target.paths)
            attempt = 1 + max((run.attempt for run in self.stored(tree_hash).values()), default=0)
            seed = self.seed + attempt - 1 if self.seed is not None else secrets.randbits(31)
            jobs = [Job(self.probe.name, case.id, str(root), self.executor.device, self.executor.dtype, seed) for case in missing]
            for job, result in zip(jobs, self.executor.run_many(jobs)):
                self.store.add_run(
                    RunRecord(
                        repo_id=self.repo_id,
                        sha=sha,
                        tree_hash=tree_hash,
                        environment_id=self.environment_id,
                        probe_id=self.probe_id,
                        case_id=job.case_id,
                        outcome=result.outcome,
                        metrics=result.metrics,
                        signature=result.signature,
                        detail=result.detail,
                        duration_s=result.duration_s,
                        started_at=datetime.now(timezone.utc) - timedelta(seconds=result.duration_s),
                        attempt=attempt,
                        seed=seed,
                        trigger=self.trigger,
                        session_id=session_id,
                    )
                )
                cases[job.case_id] = CaseOutcome(job.case_id, result.outcome, result.signature, result.metrics)
                if on_case is not None:
                    on_case(cases[job.case_id])
            self.executions += 1
        else:
            self.reused += 1
        ordered = tuple(cases[case.id] for case in self.probe.cases)
        return Measurement(sha, tree_hash, verdict_of(c.outcome for c in ordered), ordered, reused=not missing)


def _case_outcome(run: StoredRun) -> CaseOutcome:
    return CaseOutcome(run.case_id, run.outcome, run.signature, dict(run.metrics))
