"""Measure revisions with one probe: stored results first, the executor for the rest.

A measurement is keyed by the tree of the target's paths, not by the commit: a commit that only
touches files outside those paths reuses its parent's result, and nothing measured in this
environment with this probe version is ever run again. Each case's result is stored the moment
it arrives, so an interrupted command loses at most the cases in flight.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from db.store import RunRecord, Store, StoredRun
from probes.api import Outcome, Probe

from .config import Target
from .executors import Job, JobResult, LocalExecutor
from .revisions import Repo
from .snapshots import SnapshotCache
from .verdicts import FlakeEstimate, Verdict, flake_estimate, verdict_of, verdicts_by_attempt


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
        return verdicts_by_attempt(by_attempt)

    def flake_history(self) -> FlakeEstimate | None:
        """This probe's observed flake rate in this environment, from every stored tree."""
        by_tree = self.store.attempt_outcomes(self.probe.name, self.environment_id)
        return flake_estimate(verdicts_by_attempt(attempts) for attempts in by_tree.values())

    def measure(self, sha: str, tree_hash: str, session_id: int | None = None, rerun: bool = False) -> Measurement:
        """Stored results when every case has one (unless ``rerun``), else run what is missing."""
        return self.measure_many([Request(sha, tree_hash, rerun)], session_id)[0]

    def measure_many(self, requests: list[Request], session_id: int | None = None) -> list[Measurement]:
        """Measure several revisions in one round: every missing case goes to the executor at once,
        so W workers measure W revisions side by side. A tree asked for twice is run once."""
        plans: dict[tuple[str, bool], _Plan] = {}
        for request in requests:
            key = (request.tree_hash, request.rerun)
            if key not in plans:
                plans[key] = self._plan(request)
        jobs = [job for plan in plans.values() for job in plan.jobs]
        results = iter(self.executor.run_many(jobs) if jobs else [])
        for plan in plans.values():
            for job in plan.jobs:
                result = next(results)
                self.store.add_run(plan.record(self, job, result, session_id))
                plan.cases[job.case_id] = CaseOutcome(job.case_id, result.outcome, result.signature, result.metrics)
            if plan.jobs:
                self.executions += 1
            else:
                self.reused += 1
        measured = []
        for request in requests:
            plan = plans[(request.tree_hash, request.rerun)]
            ordered = tuple(plan.cases[case.id] for case in self.probe.cases)
            verdict = verdict_of(c.outcome for c in ordered)
            measured.append(Measurement(request.sha, request.tree_hash, verdict, ordered, reused=not plan.jobs))
        return measured

    def _plan(self, request: Request) -> _Plan:
        known = {} if request.rerun else self.stored(request.tree_hash)
        plan = _Plan(request, {case_id: _case_outcome(run) for case_id, run in known.items()})
        missing = [case for case in self.probe.cases if case.id not in known]
        if missing:
            root = self.snapshots.materialise(self.repo, request.sha, self.target.paths)
            plan.attempt = 1 + max((run.attempt for run in self.stored(request.tree_hash).values()), default=0)
            plan.seed = self.seed + plan.attempt - 1 if self.seed is not None else secrets.randbits(31)
            device, dtype = self.executor.device, self.executor.dtype
            plan.jobs = [Job(self.probe.name, case.id, str(root), device, dtype, plan.seed) for case in missing]
        return plan


@dataclass(frozen=True)
class Request:
    sha: str
    tree_hash: str
    rerun: bool = False


@dataclass
class _Plan:
    """What measuring one request takes: the cases already known and the jobs still to run."""

    request: Request
    cases: dict[str, CaseOutcome]
    jobs: list[Job] = field(default_factory=list)
    attempt: int = 1
    seed: int = 0

    def record(self, prober: Prober, job: Job, result: JobResult, session_id: int | None) -> RunRecord:
        return RunRecord(
            repo_id=prober.repo_id,
            sha=self.request.sha,
            tree_hash=self.request.tree_hash,
            environment_id=prober.environment_id,
            probe_id=prober.probe_id,
            case_id=job.case_id,
            outcome=result.outcome,
            metrics=result.metrics,
            signature=result.signature,
            detail=result.detail,
            duration_s=result.duration_s,
            started_at=datetime.now(timezone.utc) - timedelta(seconds=result.duration_s),
            attempt=self.attempt,
            seed=self.seed,
            trigger=prober.trigger,
            session_id=session_id,
        )


def _case_outcome(run: StoredRun) -> CaseOutcome:
    return CaseOutcome(run.case_id, run.outcome, run.signature, dict(run.metrics))
