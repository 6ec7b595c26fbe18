"""A bisect session: both ends verified, rounds of probes chosen by a strategy, every verdict
stored, resumable.

The search itself is ``tracker.search.strategies``; this module feeds it measurements and keeps the session
in the store, so a session killed at any point is rebuilt from its stored steps.

Candidates are target trees, not commits: a probe's result can only change where the tree of the
target's paths changes, so the range is cut into runs of commits with one tree and the strategy
sees the first commit of each run. A culprit is therefore always a commit that changed the target.

Evidence. When the strategy asks for a revision, the complete stored attempts at its tree that
it has not been fed yet are fed to it (flake-aware strategies all of them, oldest first, so a
stored disagreement shows at once; binary and k-ary the latest); with none, the revision is
measured: its first time from the store or by one execution, afterwards by a rerun. Each verdict
fed is one stored step, naming its attempt.

Resuming. A session stores everything that steers it (the options, the execution settings, the
flake prior read when it started) and is driven by one process at a time. A resumed session
replays its steps and continues the same search: an attempt the killed process finished without
storing its step is fed from the store, one it left half-done is completed, and its budget counts
every attempt the session executed, before the kill or after.

Ends. Binary and k-ary trust one result per end: a good end that is not good or a bad end that is
not bad stops the session with exit code 2. auto and bayes allow for flakes: the good end is run
up to ``GOOD_END_ATTEMPTS`` times until it passes and the bad end up to ``BAD_END_ATTEMPTS`` times
until it fails (an intermittent bug that fails one run in four still fails within ten runs 94 % of
the time); every attempt is evidence for the search, and an end that never behaves, or that is
untestable, stops the session as above.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from db.store import Store

from tracker.core.records import CommitInfo, FINISHED, SessionRow

from tracker.execution import owners
from tracker.search.strategies import DEFAULT_PRIOR_STRENGTH, Strategy, StrategyName, make_strategy
from tracker.core.errors import UsageError
from tracker.measure import Measurement, Prober, Request
from tracker.targets.reuse import Attempt
from tracker.targets.revisions import Repo
from tracker.search.transitions import group_runs
from tracker.core.verdicts import Verdict

GOOD_END_ATTEMPTS = 3
BAD_END_ATTEMPTS = 10
FLAKE_AWARE: frozenset[str] = frozenset({"auto", "bayes"})
# A flake rate read from fewer repeated runs is no history: "no flake in 4 runs" says little.
MIN_HISTORY_RUNS = 10


@dataclass(frozen=True)
class BisectOptions:
    """How to search: ``workers`` revisions are measured side by side in each round; ``max_runs``
    bounds the executions of the session (None: no bound)."""

    strategy: StrategyName = "auto"
    workers: int = 1
    confidence: float = 0.95
    max_runs: int | None = None


@dataclass(frozen=True)
class FlakePrior:
    """The probe's flake rate read from history when the session started, and its weight in pseudo-runs."""

    rate: float
    runs: float


@dataclass(frozen=True)
class StoredOptions:
    """What a session stores to be resumed as the same search."""

    search: BisectOptions
    execution: Mapping[str, Any]
    prior: FlakePrior | None

    def to_json(self) -> dict[str, Any]:
        return {"search": asdict(self.search), "execution": dict(self.execution), "prior": asdict(self.prior) if self.prior else None}

    @classmethod
    def of(cls, session: SessionRow) -> StoredOptions:
        if not session.options:
            raise UsageError(
                f"bisect session {session.id} was started by an older regtrack that did not store its options; "
                "start a new bisect with --good and --bad"
            )
        prior = session.options.get("prior")
        return cls(BisectOptions(**session.options["search"]), session.options["execution"], FlakePrior(**prior) if prior else None)


def open_session(store: Store, repo_id: int, target: str, probe_id: int, probe_name: str) -> SessionRow:
    """The newest unfinished bisect of this target and probe, now driven by this process alone."""
    sessions = store.open_sessions(repo_id, target, probe_id)
    if not sessions:
        raise UsageError(f"no unfinished bisect of probe {probe_name!r} on target {target!r}; start one with --good and --bad")
    take_session(store, sessions[0].id)
    return sessions[0]


def take_session(store: Store, session_id: int) -> None:
    """Make this process the session's one driver (again, if it is already)."""
    holder = store.take_session(session_id, owners.this_process(), owners.is_stale)
    if holder == FINISHED:
        raise UsageError(f"bisect session {session_id} was finished by another process meanwhile; see `regtrack report`")
    if holder is not None:
        raise UsageError(
            f"bisect session {session_id} is being driven by another process ({holder}); wait for it to finish or stop it, then --resume"
        )


@dataclass(frozen=True)
class Step:
    sha: str
    verdict: Verdict
    reused: bool


@dataclass
class BisectReport:
    session_id: int
    probe: str
    good: str
    bad: str
    strategy: str
    culprit: CommitInfo | None
    candidates: list[CommitInfo]
    confidence: float = 1.0
    no_culprit: bool = False
    fail_rate_before: float | None = None
    fail_rate_after: float | None = None
    switch_reason: str | None = None
    flake_rate_prior: float | None = None
    culprit_measurement: Measurement | None = None
    parent_measurement: Measurement | None = None
    steps: list[Step] = field(default_factory=list)
    executions: int = 0
    reused: int = 0  # steps answered from stored results
    rounds: int = 0

    def to_json(self) -> dict[str, object]:
        def measured(m: Measurement | None) -> dict[str, object] | None:
            if m is None:
                return None
            return {"sha": m.sha, "verdict": m.verdict.value, "signature": m.signature, "metrics": m.metrics}

        return {
            "session": self.session_id,
            "probe": self.probe,
            "good": self.good,
            "bad": self.bad,
            "strategy": self.strategy,
            "culprit": self.culprit.sha if self.culprit else None,
            "subject": self.culprit.subject if self.culprit else None,
            "pr_number": self.culprit.pr_number if self.culprit else None,
            "candidates": [c.sha for c in self.candidates],
            "confidence": self.confidence,
            "no_culprit": self.no_culprit,
            "fail_rate_before": self.fail_rate_before,
            "fail_rate_after": self.fail_rate_after,
            "switch_reason": self.switch_reason,
            "flake_rate_prior": self.flake_rate_prior,
            "culprit_result": measured(self.culprit_measurement),
            "parent_result": measured(self.parent_measurement),
            "steps": [{**asdict(s), "verdict": s.verdict.value} for s in self.steps],
            "executions": self.executions,
            "reused": self.reused,
            "rounds": self.rounds,
        }


class BadEnd(UsageError):
    """An end of the range does not behave as the user said: a good end that fails, a bad end that passes."""


StepCallback = Callable[["Step", Measurement], None]


class BisectSession:
    def __init__(
        self, store: Store, repo: Repo, prober: Prober, options: BisectOptions | None = None, on_step: StepCallback | None = None
    ) -> None:
        self.store, self.repo, self.prober = store, repo, prober
        self.options = options or BisectOptions()
        self.on_step = on_step

    def start(self, good_rev: str, bad_rev: str, execution: Mapping[str, Any] | None = None) -> BisectReport:
        """A new session; ``execution`` (the settings the prober's executor runs with) is stored so
        that ``--resume`` rebuilds the same executor."""
        good, bad = self.repo.resolve(good_rev), self.repo.resolve(bad_rev)
        line = [good, *self.repo.first_parent_range(good, bad)]
        stored = StoredOptions(self.options, dict(execution or {}), self._flake_prior())
        session_id = self.store.start_session(
            self.prober.repo_id,
            self.prober.target.name,
            self.prober.probe_id,
            good,
            bad,
            self.options.strategy,
            options=stored.to_json(),
            driver=owners.this_process(),
        )
        return self._drive(session_id, line, stored)

    def resume(self, session: SessionRow) -> BisectReport:
        """Continue ``session`` (see ``open_session``) with the options it stored; the prober must
        run with the session's stored execution settings."""
        stored = StoredOptions.of(session)
        take_session(self.store, session.id)
        line = [session.good_sha, *self.repo.first_parent_range(session.good_sha, session.bad_sha)]
        return self._drive(session.id, line, stored)

    def _flake_prior(self) -> FlakePrior | None:
        flake = self.prober.flake_history()
        if flake is None or flake.runs < MIN_HISTORY_RUNS:
            return None
        # the history's weight as pseudo-runs, up to the weight of a prior without history
        return FlakePrior(flake.rate, min(flake.runs, DEFAULT_PRIOR_STRENGTH))

    def _drive(self, session_id: int, line: list[str], stored: StoredOptions) -> BisectReport:
        run = _Run(self, session_id, line, stored)
        try:
            run.verify_ends()
            run.search()
        except BadEnd as error:
            self.store.finish_session(session_id, "failed", {"error": str(error)})
            raise
        report = run.report()
        self.store.finish_session(session_id, "done", report.to_json())
        return report


class _Run:
    """One pass over a session: the candidates, the strategy, and the evidence fed to it."""

    def __init__(self, session: BisectSession, session_id: int, line: list[str], stored: StoredOptions) -> None:
        self.session, self.prober, self.session_id = session, session.prober, session_id
        self.options = stored.search
        self.strategy_name = self.options.strategy
        self.good, self.bad = line[0], line[-1]
        trees = self.prober.record_commits(line)
        runs = group_runs([trees[sha] for sha in line])
        if len(runs) < 2:
            raise UsageError(
                f"{self.good[:12]} and {self.bad[:12]} have the same tree under the target's paths, so no commit between "
                "them can change the probe's result; pick ends where the target differs"
            )
        # Index 0 measures the good end itself, the last index the bad end; the others the first
        # commit of their tree. A commit maps to the index of its tree's run.
        self.candidates = [line[r.start] for r in runs]
        self.shas = [self.good, *self.candidates[1:-1], self.bad]
        self.trees = [trees[sha] for sha in self.shas]
        self.index_of = {line[i]: index for index, r in enumerate(runs) for i in r}
        self.flake_rate_prior = stored.prior.rate if stored.prior else None
        self.strategy: Strategy = make_strategy(
            self.strategy_name,
            len(self.candidates),
            self.options.workers,
            self.options.confidence,
            self.options.max_runs,
            self.flake_rate_prior,
            stored.prior.runs if stored.prior else None,
        )
        self.flake_aware = self.strategy_name in FLAKE_AWARE
        self.steps: list[Step] = []
        self.verdicts: dict[int, list[Verdict]] = {}
        self.fed: dict[int, int] = {}
        """The newest attempt fed for each index."""
        self.measurements: dict[int, Measurement] = {}
        stored_steps = self.session.store.steps(session_id)
        for step in stored_steps:
            self._feed(self.index_of[step.sha], Verdict(step.verdict), step.reused, step.attempt or 0)
        self.rounds = max((step.round or 0 for step in stored_steps), default=0)

    # -- evidence ---------------------------------------------------------------------------------

    def _feed(self, index: int, verdict: Verdict, reused: bool, attempt: int, measurement: Measurement | None = None) -> None:
        """One verdict to the strategy; stored as a step unless it is a stored step replayed."""
        step = Step(self.shas[index], verdict, reused)
        self.steps.append(step)
        self.verdicts.setdefault(index, []).append(verdict)
        self.fed[index] = max(self.fed.get(index, 0), attempt)
        self.strategy.record(index, verdict)
        if measurement is not None:
            self.session.store.add_step(self.session_id, step.sha, verdict.value, reused, attempt, self.rounds)
            if self.session.on_step is not None:
                self.session.on_step(step, measurement)

    def measure(self, indices: list[int]) -> None:
        """One round: stored attempts not fed yet go to the strategy; the other revisions are measured."""
        requests: list[tuple[int, Request]] = []
        for index in indices:
            unfed = self._unfed(index)
            for attempt in unfed if self.flake_aware else unfed[-1:]:
                measurement = self.prober.measurement_of(self.shas[index], attempt)
                self.measurements[index] = measurement
                self._feed(index, measurement.verdict, True, attempt.number, measurement)
            if not unfed:
                requests.append((index, Request(self.shas[index], self.trees[index], rerun=index in self.fed)))
        if not requests:
            return
        executions = self.prober.executions
        measured = self.prober.measure_many([request for _, request in requests], self.session_id)
        if self.prober.executions > executions:
            self.rounds += 1
        for (index, _), measurement in zip(requests, measured):
            self.measurements[index] = measurement
            self._feed(index, measurement.verdict, measurement.reused, measurement.attempt, measurement)

    def _unfed(self, index: int) -> list[Attempt]:
        newest_fed = self.fed.get(index, 0)
        complete = [a for a in self.prober.attempts(self.trees[index]) if a.complete(self.prober.case_ids)]
        return [a for a in complete if a.number > newest_fed]

    def _executions(self) -> int:
        return self.session.store.session_attempts(self.session_id)

    # -- the ends ---------------------------------------------------------------------------------

    def verify_ends(self) -> None:
        ends = {0: (Verdict.GOOD, GOOD_END_ATTEMPTS), len(self.shas) - 1: (Verdict.BAD, BAD_END_ATTEMPTS)}
        while pending := [
            i for i, (expected, attempts) in ends.items() if not self._end_settled(i, expected, attempts if self.flake_aware else 1)
        ]:
            self.measure(pending)

    def _end_settled(self, index: int, expected: Verdict, limit: int) -> bool:
        seen = self.verdicts.get(index, [])
        if not seen:
            return False
        if expected in (seen if self.flake_aware else seen[-1:]):
            return True
        if seen[-1] is Verdict.SKIP or len(seen) >= limit:
            raise BadEnd(_bad_end_message(self.prober.probe.name, expected, self._measurement(index), len(seen)))
        return False

    # -- the search -------------------------------------------------------------------------------

    def search(self) -> None:
        while not self.strategy.done():
            if self.options.max_runs is not None and self._executions() >= self.options.max_runs:
                return
            indices = sorted(set(self.strategy.next_indices(self.options.workers)))
            if not indices:
                return
            self.measure(indices)

    def report(self) -> BisectReport:
        answer = self.strategy.answer()
        commit = self._commit
        culprit = commit(answer.culprit) if answer.culprit is not None else None
        report = BisectReport(
            session_id=self.session_id,
            probe=self.prober.probe.name,
            good=self.good,
            bad=self.bad,
            strategy=self.strategy_name,
            culprit=culprit,
            candidates=[commit(i) for i in answer.candidates],
            confidence=answer.confidence,
            no_culprit=answer.no_culprit,
            fail_rate_before=answer.fail_rate_before,
            fail_rate_after=answer.fail_rate_after,
            switch_reason=getattr(self.strategy, "switch_reason", None),
            flake_rate_prior=self.flake_rate_prior,
            steps=self.steps,
            rounds=self.rounds,
        )
        if answer.culprit is not None:
            report.culprit_measurement = self._evidence(answer.culprit)
            report.parent_measurement = self._evidence(answer.culprit - 1)
        report.executions = self._executions()
        report.reused = sum(step.reused for step in self.steps)
        return report

    def _commit(self, index: int) -> CommitInfo:
        info = self.session.store.commit(self.prober.repo_id, self.candidates[index])
        assert info is not None, "record_commits stored every commit of the range"
        return info

    def _evidence(self, index: int) -> Measurement | None:
        """The stored result at a probed revision (nothing is run for it)."""
        return self._measurement(index) if index in self.verdicts else None

    def _measurement(self, index: int) -> Measurement:
        """The latest result at a probed revision: this pass's, or the store's."""
        return self.measurements.get(index) or self.prober.measure(self.shas[index], self.trees[index])


def _bad_end_message(probe: str, expected: Verdict, measured: Measurement, attempts: int) -> str:
    evidence = measured.signature or measured.verdict.value
    times = f" in {attempts} runs" if attempts > 1 else ""
    if expected is Verdict.GOOD:
        return (
            f"the good end {measured.sha[:12]} is {measured.verdict.value}{times} under {probe} ({evidence}); "
            "pass an older --good that passes"
        )
    return (
        f"the bad end {measured.sha[:12]} is {measured.verdict.value}{times} under {probe} ({evidence}); "
        "pass a --bad that fails"
    )
