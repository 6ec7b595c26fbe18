"""Measure revisions with one probe: stored results first, the executor for the rest.

A measurement is keyed by the tree of the target's paths, not by the commit, and nothing measured
in this environment with this probe version and these settings (``tracker.targets.reuse``) is run
again. Each case is claimed in the store before it runs, so concurrent processes run it once, and
its result is stored the moment it arrives, so an interrupted command loses only the cases in flight.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from probes.api import Probe
from probes.sources import spec_of
from tracker.core.errors import UsageError
from tracker.core.measurements import CaseOutcome, Measurement
from tracker.core.records import RunRecord
from tracker.core.verdicts import (
    WORKER_DEATHS,
    FlakeEstimate,
    Outcome,
    Verdict,
    flake_estimate,
    reason_of,
    verdict_of,
)
from tracker.execution import owners
from tracker.execution.claims import Claims, Plan, Request
from tracker.execution.executors import Executor, Job, JobResult
from tracker.execution.protocol import SNAPSHOT_MODIFIED, Revision
from tracker.targets.read_reuse import ReadReuse
from tracker.targets.reuse import Attempt, attempt_settings, attempts_of, complete_verdicts, settings_key
from tracker.targets.revisions import paths_key
from tracker.targets.setup import Setup, SetupFailed
from tracker.workspace import Workspace

WAIT_POLL_S = 0.2
SNAPSHOT_RETRIES = 3


@dataclass(frozen=True)
class Filing:
    """The store's ids that a prober's runs are filed under."""

    repo_id: int
    probe_id: int
    environment_id: int


class Prober:
    """Measures revisions of one target with one probe in one environment under one set of settings.

    ``open`` records the repository, the probe version and the environment first; the constructor
    only builds from what is recorded."""

    def __init__(
        self,
        ws: Workspace,
        probe: Probe,
        executor: Executor,
        filing: Filing,
        trigger: str,
        seed: int | None = None,
        fresh: bool = False,
    ) -> None:
        self.store, self.repo, self.target, self.snapshots = ws.store, ws.repo, ws.target, ws.snapshots
        self.probe, self.executor, self.trigger, self.seed = probe, executor, trigger, seed
        self.fresh = fresh
        """Measure each tree afresh the first time it is asked for, whatever is stored (``--fresh``)."""
        self._measured_here: set[str] = set()
        self.repo_id, self.probe_id, self.environment_id = filing.repo_id, filing.probe_id, filing.environment_id
        self.code_hash = probe.code_hash
        self.source = spec_of(probe)
        self.timeout_s = executor.case_timeout(self.target.timeout_s)
        self.setup = Setup(self.target.setup, self.target.env) if self.target.setup is not None else None
        self.case_ids = [case.id for case in probe.cases]
        dtype, setup, roots = executor.dtype, self.target.setup, self.target.import_roots
        self.case_keys = {case.id: settings_key(dtype, seed, case.params, setup, roots) for case in probe.cases}
        self.paths_key = paths_key(self.target.paths)
        untraced = self.setup is not None or self.source.self_timed
        reads = self.source.reads if self.setup is None else ()
        self.read_reuse = ReadReuse(
            self.store,
            self.repo,
            self.target.paths,
            self.probe_id,
            self.environment_id,
            self.case_keys,
            declared_reads=reads,
            traced_reads=not untraced,
        )
        self.claims = Claims(
            self.store, self.probe_id, self.environment_id, self.case_keys, self.timeout_s, self.attempts
        )
        self.executions = 0
        self.reused = 0

    @classmethod
    def open(
        cls,
        ws: Workspace,
        probe: Probe,
        executor: Executor,
        trigger: str,
        seed: int | None = None,
        fresh: bool = False,
    ) -> Prober:
        """A prober of ``ws``'s target whose repository, probe version and environment are recorded in
        its store; telling the environment may start a worker (``Executor.environment``)."""
        target = ws.target
        if target.setup is not None and executor.makes_snapshots:
            raise UsageError(
                f"target {target.name!r} has a setup step, which only the local executor runs; drop --executor ray"
            )
        repo_id = ws.store.repository(ws.repo.path)
        probe_id = ws.store.probe_version(probe.name, probe.version, probe.code_hash)
        measured_in = executor.environment(target.env)
        environment_id = ws.store.environment(replace(measured_in, facts=dict(target.facts)))
        return cls(ws, probe, executor, Filing(repo_id, probe_id, environment_id), trigger, seed, fresh)

    def record_commits(self, shas: list[str]) -> dict[str, str]:
        """Store the metadata and target tree of each commit not stored yet; returns each one's
        tree hash. A commit's tree never changes, so a range bisected or scanned again asks git
        nothing about the commits it recorded before."""
        trees = self.store.stored_trees(self.repo_id, self.paths_key, shas)
        missing = [sha for sha in dict.fromkeys(shas) if sha not in trees]
        if missing:
            found = self.repo.tree_hashes(missing, self.target.paths)
            self.store.record_commits(self.repo_id, self.repo.commit_infos(missing))
            self.store.record_trees(self.repo_id, self.paths_key, found)
            trees.update(found)
        return {sha: trees[sha] for sha in shas}

    def stored_results_stand(self, tree_hash: str) -> bool:
        """Whether results stored before this prober measured ``tree_hash`` may answer for it: always,
        unless it measures afresh and has not measured that tree yet."""
        return not self.fresh or tree_hash in self._measured_here

    def attempts(self, tree_hash: str) -> list[Attempt]:
        """The stored attempts at ``tree_hash`` under this probe, environment and settings, oldest first."""
        runs = self.store.runs_for_tree(tree_hash, self.probe_id, self.environment_id, list(self.case_keys.values()))
        return attempts_of(runs, self.case_keys)

    def attempt_verdicts(self, tree_hash: str) -> list[Verdict]:
        """The verdict of each complete stored attempt at ``tree_hash``, oldest first: reruns that
        disagree show a flaky result."""
        return complete_verdicts(self.attempts(tree_hash), self.case_ids)

    def died(self, tree_hash: str) -> bool:
        """Whether the latest stored attempt at ``tree_hash`` ended a case in a crash or a timeout:
        a worker's death, which even a deterministic probe's rerun need not repeat."""
        attempts = self.attempts(tree_hash)
        return bool(attempts) and any(run.outcome in WORKER_DEATHS for run in attempts[-1].runs.values())

    def flake_history(self) -> FlakeEstimate | None:
        """This probe's observed flake rate in this environment at this dtype, from every stored
        tree, whatever the seeds (an attempt is judged only when complete)."""
        attempts: dict[tuple[str, str, int], dict[str, Outcome]] = {}
        outcomes = self.store.attempt_outcomes(self.probe.name, self.environment_id, self.executor.dtype)
        for tree, key, number, case_id, outcome in outcomes:
            attempts.setdefault((tree, attempt_settings(key), number), {})[case_id] = outcome
        by_tree: dict[str, list[Verdict]] = {}
        for (tree, _, _), cases in sorted(attempts.items()):
            if set(self.case_ids) <= set(cases):
                by_tree.setdefault(tree, []).append(verdict_of(cases.values()))
        return flake_estimate(by_tree.values())

    def measurement_of(self, sha: str, attempt: Attempt) -> Measurement:
        """A complete stored attempt as a measurement (nothing runs)."""
        cases = tuple(CaseOutcome.of(attempt.runs[case_id]) for case_id in self.case_ids)
        tree_hash = next(iter(attempt.runs.values())).tree_hash
        return Measurement(sha, tree_hash, verdict_of(c.outcome for c in cases), cases, True, attempt.number)

    def measure(self, sha: str, tree_hash: str, session_id: int | None = None, rerun: bool = False) -> Measurement:
        """The latest complete stored attempt (unless ``rerun``, see ``_reruns``), else run what is missing."""
        return self.measure_many([Request(sha, tree_hash, rerun)], session_id)[0]

    def measure_many(self, requests: Sequence[Request], session_id: int | None = None) -> list[Measurement]:
        """Measure several revisions in one round: every missing case goes to the executor at once,
        so W workers measure W revisions side by side. A tree asked for twice is measured once."""
        requests = [replace(r, rerun=self._reruns(r)) for r in requests]
        plans: dict[tuple[str, bool], Plan] = {}
        for request in requests:
            plans.setdefault((request.tree_hash, request.rerun), self._plan(request, session_id))
        unknown = [plan for plan in plans.values() if plan.missing]
        if unknown:
            try:
                self._execute(unknown, session_id)
            finally:
                self.store.release_claims(owners.this_process())
        measured = []
        for request in requests:
            plan = plans[(request.tree_hash, request.rerun)]
            ordered = tuple(plan.cases[case_id] for case_id in self.case_ids)
            verdict = verdict_of(c.outcome for c in ordered)
            attempt = plan.attempt or 1
            measured.append(Measurement(request.sha, request.tree_hash, verdict, ordered, not plan.executed, attempt))
        for plan in plans.values():
            self._measured_here.add(plan.request.tree_hash)
            if plan.executed:
                self.executions += 1
            else:
                self.reused += 1
        return measured

    def _reruns(self, request: Request) -> bool:
        """Whether ``request`` gets a new attempt: where asked, unless the probe is deterministic,
        whose one complete result per tree is final (a rerun could only repeat it) but for a
        worker's death; and always for a tree that ``--fresh`` has not measured yet."""
        if not self.stored_results_stand(request.tree_hash):
            return True
        return request.rerun and (not self.probe.deterministic or self.died(request.tree_hash))

    def _plan(self, request: Request, session_id: int | None) -> Plan:
        """Reuse the latest complete attempt; complete an interrupted one; or start a new one."""
        attempts = self.attempts(request.tree_hash)
        if not attempts and not request.rerun and (elsewhere := self.read_reuse.reusable(request.sha)):
            source = [a for a in self.attempts(elsewhere.tree_hash) if a.number == elsewhere.attempt]
            run_ids = [run.id for attempt in source for run in attempt.runs.values()]
            self.store.copy_attempt(self.repo_id, request.sha, request.tree_hash, run_ids, session_id, self.trigger)
            attempts = self.attempts(request.tree_hash)
        latest = attempts[-1] if attempts else None
        plan = Plan(request)
        if latest is not None and not latest.complete(self.case_ids):
            resumable = not request.rerun or (session_id is not None and session_id in latest.sessions())
            if resumable:
                plan.attempt, plan.seed = latest.number, next(iter(latest.runs.values())).seed
                plan.cases = {case_id: CaseOutcome.of(run) for case_id, run in latest.runs.items()}
        elif latest is not None and not request.rerun:
            plan.attempt = latest.number
            plan.cases = {case_id: CaseOutcome.of(run) for case_id, run in latest.runs.items()}
        elif latest is None:
            plan.attempt = 1
        plan.missing = [case_id for case_id in self.case_ids if case_id not in plan.cases]
        return plan

    def _execute(self, plans: list[Plan], session_id: int | None) -> None:
        """Claim, run and store every missing case; wait for the ones other processes hold."""
        while plans:
            jobs: list[tuple[Plan, Job]] = []
            waiting: list[Plan] = []
            for plan in plans:
                claimed, held = self.claims.claim(plan, session_id, self._seed_of)
                try:
                    jobs += [(plan, job) for job in self._jobs(plan, claimed)]
                except SetupFailed as failure:
                    for case_id in claimed:
                        self._store(plan, case_id, _untestable(failure), session_id)
                if held:
                    waiting.append(plan)
            if jobs:
                for index, result in self.executor.run_iter([job for _, job in jobs], self.timeout_s):
                    plan, job = jobs[index]
                    self._store(plan, job.case_id, result, session_id)
            for plan in waiting:
                self.claims.collect(plan)
            plans = [plan for plan in plans if plan.missing]
            if plans and not jobs:
                time.sleep(WAIT_POLL_S)

    def _seed_of(self, attempt: int) -> int:
        """Attempt ``attempt``'s seed: the given seed plus the attempt's offset, or a fresh one;
        always the same one for a deterministic probe."""
        if self.probe.deterministic:
            return self.seed or 0
        return self.seed + attempt - 1 if self.seed is not None else secrets.randbits(31)

    def _jobs(self, plan: Plan, case_ids: list[str]) -> list[Job]:
        if not case_ids:
            return []
        if plan.seed is None:
            plan.seed = self._seed_of(plan.attempt or 1)
        root, revision = self._placed(plan.request.sha)
        device, dtype = self.executor.device, self.executor.dtype
        timeout_s = self.timeout_s if self.source.self_timed else None
        target, source = self.target, self.source.to_json()
        return [
            Job(
                self.probe.name,
                case_id,
                root,
                device,
                dtype,
                plan.seed,
                import_roots=target.import_roots,
                env=dict(target.env),
                source=source,
                code_hash=self.code_hash,
                timeout_s=timeout_s,
                revision=revision,
            )
            for case_id in case_ids
        ]

    def _placed(self, sha: str) -> tuple[str, Revision | None]:
        """Where the jobs find the revision: a snapshot made here, or one the executor makes where they run."""
        if self.executor.makes_snapshots:
            return "", Revision(str(self.repo.path), self.repo.resolve(sha), tuple(self.target.paths))
        return str(self.snapshots.materialise(self.repo, sha, self.target.paths, self.setup)), None

    def _store(self, plan: Plan, case_id: str, result: JobResult, session_id: int | None) -> None:
        if (result.signature or "").startswith(SNAPSHOT_MODIFIED) and plan.retries < SNAPSHOT_RETRIES:
            # not a result: the case stays missing, its claim is given up, and the next job for it
            # gets a rebuilt snapshot
            plan.retries += 1
            self.claims.release(plan, case_id)
            return
        input_set_id = self.read_reuse.input_set_id(plan.request.sha, result.reads)
        record = self._record(plan, case_id, result, session_id, input_set_id)
        if self.store.add_run(record, owner=owners.this_process()) is not None:
            reason = reason_of(result.outcome, result.signature, result.detail)
            plan.cases[case_id] = CaseOutcome(case_id, result.outcome, reason, result.metrics, record.duration_s)
            plan.missing.remove(case_id)
            plan.executed = True

    def _record(
        self, plan: Plan, case_id: str, result: JobResult, session_id: int | None, input_set_id: int | None
    ) -> RunRecord:
        assert plan.attempt is not None and plan.seed is not None, "a job runs only under a claimed attempt"
        return RunRecord(
            repo_id=self.repo_id,
            sha=plan.request.sha,
            tree_hash=plan.request.tree_hash,
            environment_id=self.environment_id,
            probe_id=self.probe_id,
            case_id=case_id,
            settings_key=self.case_keys[case_id],
            dtype=self.executor.dtype,
            outcome=result.outcome,
            metrics=result.metrics,
            signature=result.signature,
            detail=result.detail,
            duration_s=result.duration_s,
            started_at=datetime.now(UTC) - timedelta(seconds=result.duration_s),
            attempt=plan.attempt,
            seed=plan.seed,
            trigger=self.trigger,
            session_id=session_id,
            input_set_id=input_set_id,
            samples=result.samples,
            conditions=result.conditions,
        )


def _untestable(failure: SetupFailed) -> JobResult:
    """The result of each case of a tree whose setup failed: untestable, never bad."""
    return JobResult(Outcome.ERROR, {}, failure.signature, failure.detail, failure.duration_s)
