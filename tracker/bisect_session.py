"""The bisect driver: both ends verified, rounds of probes chosen by a strategy
(``tracker.search.strategies``), every verdict stored as a step, so a session killed at any point
is rebuilt from its steps and resumed with the options it stored, by one process at a time.

Candidates are target trees, not commits: the strategy sees the first commit of each run of
commits with one tree, so a culprit always changed the target. Stored complete attempts at a tree
are fed before anything runs (flake-aware strategies all of them, binary and k-ary the latest).
Binary and k-ary trust one result per end; auto and bayes run the good end up to
``GOOD_END_ATTEMPTS`` times until it passes and the bad end up to ``BAD_END_ATTEMPTS`` times until
it fails. A deterministic probe (``Probe.deterministic``) is never run twice on one tree: its one
result, stored or measured now, is final whatever the strategy, so ends and candidates are
measured once each and the search trusts every result, as ``git bisect`` does. An end that
never behaves, or is untestable, stops the session with exit code 2, unless ``assume_ends``
takes the ends as given, as ``git bisect`` does. With ``find_fix`` every verdict is fed
inverted (``tracker.bisect_options``) and the culprit is the first fixed commit.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tracker.bisect_options import BisectOptions, BisectReport, FlakePrior, Step, StoredOptions, searched
from tracker.core.errors import UsageError
from tracker.core.measurements import Measurement
from tracker.core.records import FINISHED, CommitInfo, SessionRow
from tracker.core.verdicts import Verdict
from tracker.execution import owners
from tracker.measure import Prober, Request
from tracker.search.strategies import (
    DEFAULT_PRIOR_STRENGTH,
    InconsistentVerdicts,
    Strategy,
    make_strategy,
)
from tracker.search.transitions import group_runs
from tracker.targets.reuse import Attempt
from tracker.targets.revisions import Repo

if TYPE_CHECKING:
    from db.store import Store

GOOD_END_ATTEMPTS = 3
BAD_END_ATTEMPTS = 10
FLAKE_AWARE: frozenset[str] = frozenset({"auto", "bayes"})
MIN_HISTORY_RUNS = 10
"""Fewer repeated runs than this are no flake history: "no flake in 4 runs" says little."""


class BadEnd(UsageError):
    """An end of the range does not behave as the user said: a good end that fails, a bad end that passes."""


@dataclass(frozen=True)
class StepProgress:
    """Where the session stands once a step is stored: step ``number`` of an ``estimate`` of the
    steps it takes in all (replayed steps counted), the target trees that may still hold the
    culprit, the rounds the strategy still expects, and the wall seconds of the step (a round's
    share for steps measured in one round; about 0 for a stored result)."""

    number: int
    estimate: int
    remaining: int
    rounds_left: int
    seconds: float


StepCallback = Callable[[Step, Measurement, StepProgress], None]


def take_session(store: Store, session_id: int) -> None:
    """Make this process the session's one driver (again, if it is already)."""
    holder = store.take_session(session_id, owners.this_process(), owners.is_stale)
    if holder == FINISHED:
        raise UsageError(
            f"bisect session {session_id} was finished by another process meanwhile; see `regtrack report`"
        )
    if holder is not None:
        raise UsageError(
            f"bisect session {session_id} is being driven by another process ({holder}); "
            "wait for it to finish or stop it, then --resume"
        )


class Bisection:
    """Drives one bisect session over ``prober``'s target; building it stores and runs nothing."""

    def __init__(
        self,
        store: Store,
        repo: Repo,
        prober: Prober,
        options: BisectOptions | None = None,
        on_step: StepCallback | None = None,
    ) -> None:
        self.store, self.repo, self.prober = store, repo, prober
        self.options = options or BisectOptions()
        self.on_step = on_step

    def start(self, good_rev: str, bad_rev: str, execution: Mapping[str, Any] | None = None) -> BisectReport:
        """A new session; ``execution`` (the settings the prober's executor runs with) is stored so
        that ``--resume`` rebuilds the same executor."""
        good, bad = self.repo.resolve(good_rev), self.repo.resolve(bad_rev)
        line = self._line(good, bad, self.options.find_fix)
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

    def answer(self, good_rev: str, bad_rev: str) -> BisectReport:
        """The session ``start`` would run, as an answer from stored results alone: no session is
        recorded, so the store may be open read-only, which raises ``db.errors.NotStored`` at the
        first result it does not hold."""
        good, bad = self.repo.resolve(good_rev), self.repo.resolve(bad_rev)
        line = self._line(good, bad, self.options.find_fix)
        run = _Run(self, None, line, StoredOptions(self.options, {}, self._flake_prior()))
        run.verify_ends()
        run.search()
        return run.report()

    def resume(self, session: SessionRow) -> BisectReport:
        """Continue ``session`` (an unfinished one of the store's) with the options it stored; the
        prober must run with the session's stored execution settings."""
        stored = StoredOptions.of(session)
        take_session(self.store, session.id)
        line = self._line(session.good_sha, session.bad_sha, stored.search.find_fix)
        return self._drive(session.id, line, stored)

    def _line(self, good: str, bad: str, find_fix: bool) -> list[str]:
        """The first-parent line from the old end to the new one: good to bad, or bad to good."""
        if not find_fix:
            return [good, *self.repo.first_parent_range(good, bad)]
        if good == bad or not self.repo.is_ancestor(bad, good):
            raise UsageError(
                f"with --find-fix, --bad {bad[:12]} (where the probe fails) must be older than --good {good[:12]} "
                "(where it passes); pass a --good from the later history of --bad"
            )
        return [bad, *self.repo.first_parent_range(bad, good)]

    def _flake_prior(self) -> FlakePrior | None:
        """The probe's flake history as the search's prior; none for a deterministic probe."""
        if self.prober.probe.deterministic:
            return None
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
    """One pass over a session: the candidates, the strategy, and the evidence fed to it. Without a
    ``session_id`` (``Bisection.answer``) nothing is stored and the executions are this pass's."""

    def __init__(self, session: Bisection, session_id: int | None, line: list[str], stored: StoredOptions) -> None:
        self.session, self.prober, self.session_id = session, session.prober, session_id
        self.options = stored.search
        self.strategy_name = self.options.strategy
        self.find_fix = self.options.find_fix
        self.old, self.new = line[0], line[-1]
        trees = self.prober.record_commits(line)
        runs = group_runs([trees[sha] for sha in line])
        if len(runs) < 2:
            raise UsageError(
                f"{self.old[:12]} and {self.new[:12]} have the same tree under the target's paths, so no commit "
                "between them can change the probe's result; pick ends where the target differs"
            )
        # Index 0 measures the old end itself, the last index the new end; the others the first
        # commit of their tree. A commit maps to the index of its tree's run.
        self.candidates = [line[r.start] for r in runs]
        self.shas = [self.old, *self.candidates[1:-1], self.new]
        self.trees = [trees[sha] for sha in self.shas]
        self.index_of = {line[i]: index for index, r in enumerate(runs) for i in r}
        self.flake_rate_prior = stored.prior.rate if stored.prior else None
        deterministic = self.prober.probe.deterministic
        self.strategy: Strategy = make_strategy(
            self.strategy_name,
            len(self.candidates),
            self.options.workers,
            self.options.confidence,
            self.options.max_runs,
            self.flake_rate_prior,
            stored.prior.runs if stored.prior else None,
            deterministic,
        )
        self.flake_aware = self.strategy_name in FLAKE_AWARE and not deterministic
        self.steps: list[Step] = []
        self.verdicts: dict[int, list[Verdict]] = {}
        """The verdicts fed to the strategy at each index (inverted in a fix search)."""
        self.fed: dict[int, int] = {}
        """The newest attempt fed for each index."""
        self.measurements: dict[int, Measurement] = {}
        stored_steps = self.session.store.steps(session_id) if session_id is not None else []
        for step in stored_steps:
            self._feed(self.index_of[step.sha], Verdict(step.verdict), step.reused, step.attempt or 0)
        self.rounds = max((step.round or 0 for step in stored_steps), default=0)

    # -- evidence ---------------------------------------------------------------------------------

    def _feed(
        self,
        index: int,
        verdict: Verdict,
        reused: bool,
        attempt: int,
        measurement: Measurement | None = None,
        seconds: float = 0.0,
    ) -> None:
        """One measured verdict to the strategy, as the direction has it; stored as a step unless
        it is a stored step replayed."""
        step = Step(self.shas[index], verdict, reused)
        self.steps.append(step)
        self.verdicts.setdefault(index, []).append(searched(verdict, self.find_fix))
        self.fed[index] = max(self.fed.get(index, 0), attempt)
        self.strategy.record(index, searched(verdict, self.find_fix))
        if measurement is not None:
            if self.session_id is not None:
                self.session.store.add_step(self.session_id, step.sha, verdict.value, reused, attempt, self.rounds)
            if self.session.on_step is not None:
                self.session.on_step(step, measurement, self._progress(seconds))

    def _progress(self, seconds: float) -> StepProgress:
        try:
            rounds, remaining = self.strategy.rounds_left(self.options.workers), self.strategy.remaining()
        except InconsistentVerdicts:
            # an end that misbehaves under a search that trusts every run: verify_ends stops the session
            rounds, remaining = 0, len(self.candidates)
        ends = 0 if self.options.assume_ends else sum(index not in self.verdicts for index in (0, len(self.shas) - 1))
        left = ends + rounds * self.options.workers
        if self.options.max_runs is not None:
            left = min(left, max(self.options.max_runs - self._executions(), 0))
        return StepProgress(len(self.steps), len(self.steps) + left, remaining, rounds, seconds)

    def measure(self, indices: list[int]) -> None:
        """One round: stored attempts not fed yet go to the strategy; the other revisions are measured."""
        requests: list[tuple[int, Request]] = []
        for index in indices:
            unfed = self._unfed(index)
            for attempt in unfed if self.flake_aware else unfed[-1:]:
                started = time.perf_counter()
                measurement = self.prober.measurement_of(self.shas[index], attempt)
                self.measurements[index] = measurement
                self._feed(index, measurement.verdict, True, attempt.number, measurement, time.perf_counter() - started)
            if not unfed:
                requests.append((index, Request(self.shas[index], self.trees[index], rerun=index in self.fed)))
        if not requests:
            return
        executions, started = self.prober.executions, time.perf_counter()
        measured = self.prober.measure_many([request for _, request in requests], self.session_id)
        if self.prober.executions > executions:
            self.rounds += 1
        ran = sum(not m.reused for m in measured)
        share = (time.perf_counter() - started) * min(self.options.workers, ran) / ran if ran else 0.0
        for (index, _), measurement in zip(requests, measured):
            self.measurements[index] = measurement
            seconds = 0.0 if measurement.reused else share
            self._feed(index, measurement.verdict, measurement.reused, measurement.attempt, measurement, seconds)

    def _unfed(self, index: int) -> list[Attempt]:
        if not self.prober.stored_results_stand(self.trees[index]):
            return []
        newest_fed = self.fed.get(index, 0)
        complete = [a for a in self.prober.attempts(self.trees[index]) if a.complete(self.prober.case_ids)]
        return [a for a in complete if a.number > newest_fed]

    def _executions(self) -> int:
        if self.session_id is None:
            return self.prober.executions
        return self.session.store.session_attempts(self.session_id)

    # -- the ends ---------------------------------------------------------------------------------

    def verify_ends(self) -> None:
        """In the strategy's terms: the old end is good and the new end bad (in a fix search, the
        old end fails and the new end passes); nothing is measured when the ends are assumed."""
        if self.options.assume_ends:
            return
        ends = {0: (Verdict.GOOD, GOOD_END_ATTEMPTS), len(self.shas) - 1: (Verdict.BAD, BAD_END_ATTEMPTS)}
        while pending := [
            i
            for i, (expected, attempts) in ends.items()
            if not self._end_settled(i, expected, attempts if self.flake_aware else 1)
        ]:
            self.measure(pending)

    def _end_settled(self, index: int, expected: Verdict, limit: int) -> bool:
        seen = self.verdicts.get(index, [])
        if not seen:
            return False
        if expected in (seen if self.flake_aware else seen[-1:]):
            return True
        if seen[-1] is Verdict.SKIP or len(seen) >= limit:
            raise BadEnd(
                _bad_end_message(self.prober.probe.name, expected, self._measurement(index), len(seen), self.find_fix)
            )
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
        good, bad = (self.new, self.old) if self.find_fix else (self.old, self.new)
        report = BisectReport(
            session_id=self.session_id,
            probe=self.prober.probe.name,
            good=good,
            bad=bad,
            strategy=self.strategy_name,
            culprit=culprit,
            candidates=[commit(i) for i in answer.candidates],
            confidence=answer.confidence,
            no_culprit=answer.no_culprit,
            fail_rate_before=self._fail_rate(answer.fail_rate_before),
            fail_rate_after=self._fail_rate(answer.fail_rate_after),
            switch_reason=getattr(self.strategy, "switch_reason", None),
            flake_rate_prior=self.flake_rate_prior,
            steps=self.steps,
            rounds=self.rounds,
            find_fix=self.find_fix,
        )
        if answer.culprit is not None:
            report.culprit_measurement = self._evidence(answer.culprit)
            report.parent_measurement = self._evidence(answer.culprit - 1)
        report.executions = self._executions()
        report.reused = sum(step.reused for step in self.steps)
        return report

    def _fail_rate(self, searched_rate: float | None) -> float | None:
        """The share of real failures: in a fix search the strategy's failures are passes."""
        if searched_rate is None or not self.find_fix:
            return searched_rate
        return 1.0 - searched_rate

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


def _bad_end_message(probe: str, expected: Verdict, measured: Measurement, attempts: int, find_fix: bool) -> str:
    """``expected`` is the strategy's: good at the old end, bad at the new one."""
    evidence = measured.signature or measured.verdict.value
    times = f" in {attempts} runs" if attempts > 1 else ""
    seen = f"{measured.sha[:12]} is {measured.verdict.value}{times} under {probe} ({evidence})"
    old_end = expected is Verdict.GOOD
    if measured.verdict is Verdict.SKIP:
        flag = "--good" if old_end != find_fix else "--bad"  # a fix search's old end is its --bad
        end = "old" if old_end else "new"
        return (
            f"the {end} end {flag} {seen}, so it cannot be judged; pass another {flag}, "
            "or --assume-ends to take the ends at your word as git bisect does"
        )
    if find_fix and old_end:
        return f"with --find-fix the old end must fail, but --bad {seen}; pass an older --bad that fails"
    if find_fix:
        return f"with --find-fix the new end must pass, but --good {seen}; pass a later --good that passes"
    if old_end:
        return f"the good end {seen}; pass an older --good that passes"
    return f"the bad end {seen}; pass a --bad that fails"
