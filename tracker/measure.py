"""Measure revisions with one probe: stored results first, the executor for the rest.

A measurement is keyed by the tree of the target's paths, not by the commit: a commit that only
touches files outside those paths reuses its parent's result, and nothing measured in this
environment with this probe version and these settings (``tracker.targets.reuse``) is ever run again.

Each case execution is claimed in the store before it runs, so concurrent processes measuring the
same tree run each case once: the others wait for the stored run. Each case's result is stored the
moment it arrives, so an interrupted command loses at most the cases in flight; its claims are
released (or, if it was killed, found stale) and the next process completes the attempt.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

from tracker.core.records import CaseKey, ClaimState, RunRecord, StoredRun
from probes.api import Outcome, Probe
from probes.sources import spec_of

from tracker.execution import owners
from tracker.targets.config import Target
from tracker.core.errors import UsageError
from tracker.execution.executors import Executor, Job, JobResult
from tracker.execution.protocol import SNAPSHOT_MODIFIED, Revision
from tracker.targets.read_reuse import ReadReuse
from tracker.targets.reuse import Attempt, attempt_settings, attempts_of, complete_verdicts, settings_key
from tracker.targets.revisions import Repo, paths_key
from tracker.targets.setup import Setup, SetupFailed
from tracker.targets.snapshots import SnapshotCache
from tracker.core.verdicts import FlakeEstimate, Verdict, flake_estimate, reason_of, verdict_of

if TYPE_CHECKING:
    from db.readonly import AnyStore

WAIT_POLL_S = 0.2
CLAIM_GRACE_S = 60.0
NEW_ATTEMPT_TRIES = 20
SNAPSHOT_RETRIES = 3


@dataclass(frozen=True)
class CaseOutcome:
    case_id: str
    outcome: Outcome
    signature: str | None
    """Why the case did not pass (``tracker.core.verdicts.reason_of``): a probe may say it only in its detail."""
    metrics: dict[str, float]


@dataclass(frozen=True)
class Measurement:
    sha: str
    tree_hash: str
    verdict: Verdict
    cases: tuple[CaseOutcome, ...]
    reused: bool
    attempt: int = 1

    @property
    def signature(self) -> str | None:
        """The failing cases' signatures, or the untestable and skipped ones' when nothing failed."""
        wanted = {Verdict.BAD: {Outcome.FAIL, Outcome.CRASH, Outcome.TIMEOUT}, Verdict.SKIP: {Outcome.ERROR, Outcome.SKIP}}
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
    """Measures revisions of one target with one probe in one environment under one set of settings."""

    def __init__(
        self,
        store: AnyStore,
        repo: Repo,
        target: Target,
        probe: Probe,
        executor: Executor,
        snapshots: SnapshotCache,
        trigger: str,
        seed: int | None = None,
        fresh: bool = False,
    ) -> None:
        self.store, self.repo, self.target, self.probe = store, repo, target, probe
        self.fresh = fresh
        """Measure each tree afresh the first time it is asked for, whatever is stored (``--fresh``)."""
        self._measured_here: set[str] = set()
        self.executor, self.snapshots, self.trigger, self.seed = executor, snapshots, trigger, seed
        self.repo_id = store.repository(repo.path)
        self.code_hash = probe.code_hash
        self.probe_id = store.probe_version(probe.name, probe.version, self.code_hash)
        self.source = spec_of(probe)
        self.timeout_s = executor.case_timeout(target.timeout_s)
        self.setup = Setup(target.setup, target.env) if target.setup is not None else None
        if self.setup is not None and executor.makes_snapshots:
            raise UsageError(f"target {target.name!r} has a setup step, which only the local executor runs; drop --executor ray")
        measured_in = executor.environment(target.env)
        self.environment_id = store.environment(replace(measured_in, facts=dict(target.facts)))
        self.case_ids = [case.id for case in probe.cases]
        self.case_keys = {
            case.id: settings_key(executor.dtype, seed, case.params, target.setup, target.import_roots)
            for case in probe.cases
        }
        self.paths_key = paths_key(target.paths)
        self.read_reuse = ReadReuse(
            store, repo, target.paths, self.probe_id, self.environment_id, self.case_keys,
            declared_reads=self.source.reads if self.setup is None else (),
            traced_reads=self.setup is None and not self.source.self_timed,
        )  # fmt: skip
        self.executions = 0
        self.reused = 0

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

    def flake_history(self) -> FlakeEstimate | None:
        """This probe's observed flake rate in this environment at this dtype, from every stored
        tree, whatever the seeds (an attempt is judged only when complete)."""
        attempts: dict[tuple[str, str, int], dict[str, Outcome]] = {}
        for tree, key, number, case_id, outcome in self.store.attempt_outcomes(self.probe.name, self.environment_id, self.executor.dtype):
            attempts.setdefault((tree, attempt_settings(key), number), {})[case_id] = outcome
        by_tree: dict[str, list[Verdict]] = {}
        for (tree, _, _), cases in sorted(attempts.items()):
            if set(self.case_ids) <= set(cases):
                by_tree.setdefault(tree, []).append(verdict_of(cases.values()))
        return flake_estimate(by_tree.values())

    def measurement_of(self, sha: str, attempt: Attempt) -> Measurement:
        """A complete stored attempt as a measurement (nothing runs)."""
        cases = tuple(_case_outcome(attempt.runs[case_id]) for case_id in self.case_ids)
        tree_hash = next(iter(attempt.runs.values())).tree_hash
        return Measurement(sha, tree_hash, verdict_of(c.outcome for c in cases), cases, True, attempt.number)

    def measure(self, sha: str, tree_hash: str, session_id: int | None = None, rerun: bool = False) -> Measurement:
        """The latest complete stored attempt (unless ``rerun``), else run what is missing."""
        return self.measure_many([Request(sha, tree_hash, rerun)], session_id)[0]

    def measure_many(self, requests: Sequence[Request], session_id: int | None = None) -> list[Measurement]:
        """Measure several revisions in one round: every missing case goes to the executor at once,
        so W workers measure W revisions side by side. A tree asked for twice is measured once."""
        requests = [replace(r, rerun=True) if not self.stored_results_stand(r.tree_hash) else r for r in requests]
        plans: dict[tuple[str, bool], _Plan] = {}
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
            measured.append(Measurement(request.sha, request.tree_hash, verdict, ordered, not plan.executed, plan.attempt or 1))
        for plan in plans.values():
            self._measured_here.add(plan.request.tree_hash)
            if plan.executed:
                self.executions += 1
            else:
                self.reused += 1
        return measured

    def _plan(self, request: Request, session_id: int | None) -> _Plan:
        """Reuse the latest complete attempt; complete an interrupted one; or start a new one."""
        attempts = self.attempts(request.tree_hash)
        if not attempts and not request.rerun and (elsewhere := self.read_reuse.reusable(request.sha)):
            source = [a for a in self.attempts(elsewhere.tree_hash) if a.number == elsewhere.attempt]
            run_ids = [run.id for attempt in source for run in attempt.runs.values()]
            self.store.copy_attempt(self.repo_id, request.sha, request.tree_hash, run_ids, session_id, self.trigger)
            attempts = self.attempts(request.tree_hash)
        latest = attempts[-1] if attempts else None
        plan = _Plan(request)
        if latest is not None and not latest.complete(self.case_ids):
            resumable = not request.rerun or (session_id is not None and session_id in latest.sessions())
            if resumable:
                plan.attempt, plan.seed = latest.number, next(iter(latest.runs.values())).seed
                plan.cases = {case_id: _case_outcome(run) for case_id, run in latest.runs.items()}
        elif latest is not None and not request.rerun:
            plan.attempt = latest.number
            plan.cases = {case_id: _case_outcome(run) for case_id, run in latest.runs.items()}
        elif latest is None:
            plan.attempt = 1
        plan.missing = [case_id for case_id in self.case_ids if case_id not in plan.cases]
        return plan

    def _execute(self, plans: list[_Plan], session_id: int | None) -> None:
        """Claim, run and store every missing case; wait for the ones other processes hold."""
        while plans:
            jobs: list[tuple[_Plan, Job]] = []
            waiting: list[_Plan] = []
            for plan in plans:
                claimed, held = self._claim(plan, session_id)
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
                self._collect(plan)
            plans = [plan for plan in plans if plan.missing]
            if plans and not jobs:
                time.sleep(WAIT_POLL_S)

    def _claim(self, plan: _Plan, session_id: int | None) -> tuple[list[str], list[str]]:
        """Claim the plan's missing cases; the ones claimed and the ones another process holds."""
        if plan.attempt is None:
            self._claim_new_attempt(plan, session_id)
            return list(plan.missing), []
        claimed, held = [], []
        for case_id in plan.missing:
            state = self.store.claim(self._key(plan, case_id), plan.attempt, owners.this_process(), self._expiry(), owners.is_stale, session_id)
            if state is ClaimState.CLAIMED:
                claimed.append(case_id)
            elif state is ClaimState.HELD:
                held.append(case_id)
        self._collect(plan)
        return claimed, held

    def _claim_new_attempt(self, plan: _Plan, session_id: int | None) -> None:
        """The smallest number no live process has used for this tree (``Store.new_attempt``), with
        every case claimed under it."""
        keys = [self._key(plan, case_id) for case_id in self.case_ids]
        for _ in range(NEW_ATTEMPT_TRIES):
            number = self.store.new_attempt(keys, owners.is_stale)
            states = [
                self.store.claim(key, number, owners.this_process(), self._expiry(), owners.is_stale, session_id)
                for key in keys
            ]
            if all(state is ClaimState.CLAIMED for state in states):
                plan.attempt = number
                plan.seed = self._seed_of(number)
                return
            self.store.release_claims(owners.this_process(), keys, number)
        raise RuntimeError(f"could not claim a new attempt of {plan.request.tree_hash[:12]} in {NEW_ATTEMPT_TRIES} tries")

    def _seed_of(self, attempt: int) -> int:
        """Attempt ``attempt``'s seed: the given seed plus the attempt's offset, or a fresh one;
        always the same one for a deterministic probe."""
        if self.probe.deterministic:
            return self.seed or 0
        return self.seed + attempt - 1 if self.seed is not None else secrets.randbits(31)

    def _jobs(self, plan: _Plan, case_ids: list[str]) -> list[Job]:
        if not case_ids:
            return []
        if plan.seed is None:
            plan.seed = self._seed_of(plan.attempt or 1)
        root, revision = self._placed(plan.request.sha)
        device, dtype = self.executor.device, self.executor.dtype
        timeout_s = self.timeout_s if self.source.self_timed else None
        return [
            Job(
                self.probe.name, case_id, root, device, dtype, plan.seed,
                import_roots=self.target.import_roots, env=dict(self.target.env),
                source=self.source.to_json(), code_hash=self.code_hash, timeout_s=timeout_s, revision=revision,
            )  # fmt: skip
            for case_id in case_ids
        ]

    def _placed(self, sha: str) -> tuple[str, Revision | None]:
        """Where the jobs find the revision: a snapshot made here, or one the executor makes where they run."""
        if self.executor.makes_snapshots:
            return "", Revision(str(self.repo.path), self.repo.resolve(sha), tuple(self.target.paths))
        return str(self.snapshots.materialise(self.repo, sha, self.target.paths, self.setup)), None

    def _store(self, plan: _Plan, case_id: str, result: JobResult, session_id: int | None) -> None:
        if (result.signature or "").startswith(SNAPSHOT_MODIFIED) and plan.retries < SNAPSHOT_RETRIES:
            # not a result: the case stays missing, its claim is given up, and the next job for it
            # gets a rebuilt snapshot
            plan.retries += 1
            self.store.release_claims(owners.this_process(), [self._key(plan, case_id)], plan.attempt)
            return
        input_set_id = self.read_reuse.input_set_id(plan.request.sha, result.reads)
        stored = self.store.add_run(plan.record(self, case_id, result, session_id, input_set_id), owner=owners.this_process())
        if stored is not None:
            plan.cases[case_id] = CaseOutcome(case_id, result.outcome, reason_of(result.outcome, result.signature, result.detail), result.metrics)
            plan.missing.remove(case_id)
            plan.executed = True

    def _collect(self, plan: _Plan) -> None:
        """Take the runs other processes stored for the plan's attempt."""
        if plan.attempt is None:
            return
        for attempt in self.attempts(plan.request.tree_hash):
            if attempt.number == plan.attempt:
                for case_id in [c for c in plan.missing if c in attempt.runs]:
                    plan.cases[case_id] = _case_outcome(attempt.runs[case_id])
                    plan.missing.remove(case_id)

    def _key(self, plan: _Plan, case_id: str) -> CaseKey:
        return CaseKey(plan.request.tree_hash, self.probe_id, self.environment_id, self.case_keys[case_id], case_id)

    def _expiry(self) -> datetime:
        """When a claim of this process may be taken over even if it seems alive: past any timeout."""
        return datetime.now(timezone.utc) + timedelta(seconds=2 * self.timeout_s + CLAIM_GRACE_S)


@dataclass(frozen=True)
class Request:
    sha: str
    tree_hash: str
    rerun: bool = False


@dataclass
class _Plan:
    """What measuring one request takes: the attempt it reports, the cases known, the ones missing."""

    request: Request
    attempt: int | None = None
    """None until a new attempt's number is claimed."""
    cases: dict[str, CaseOutcome] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    seed: int | None = None
    executed: bool = False
    retries: int = 0
    """Cases run again because an earlier case edited the snapshot."""

    def record(self, prober: Prober, case_id: str, result: JobResult, session_id: int | None, input_set_id: int | None) -> RunRecord:
        assert self.attempt is not None and self.seed is not None, "a job runs only under a claimed attempt"
        return RunRecord(
            repo_id=prober.repo_id,
            sha=self.request.sha,
            tree_hash=self.request.tree_hash,
            environment_id=prober.environment_id,
            probe_id=prober.probe_id,
            case_id=case_id,
            settings_key=prober.case_keys[case_id],
            dtype=prober.executor.dtype,
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
            input_set_id=input_set_id,
        )


def _case_outcome(run: StoredRun) -> CaseOutcome:
    return CaseOutcome(run.case_id, run.outcome, reason_of(run.outcome, run.signature, run.detail), dict(run.metrics))


def _untestable(failure: SetupFailed) -> JobResult:
    """The result of each case of a tree whose setup failed: untestable, never bad."""
    return JobResult(Outcome.ERROR, {}, failure.signature, failure.detail, failure.duration_s)
