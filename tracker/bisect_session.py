"""A bisect session: both ends verified, one probe per step, every step stored, resumable.

The search itself is ``tracker.bisect``; this module feeds it measurements and keeps the
session in the store, so a session killed at any point is rebuilt from its stored steps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from db.store import CommitInfo, Store

from .bisect import BinarySearch
from .errors import UsageError
from .measure import Measurement, Prober
from .revisions import Repo
from .verdicts import Verdict

STRATEGY = "binary"


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
    culprit: CommitInfo | None
    candidates: list[CommitInfo]
    culprit_measurement: Measurement | None = None
    parent_measurement: Measurement | None = None
    steps: list[Step] = field(default_factory=list)
    executions: int = 0
    reused: int = 0

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
            "culprit": self.culprit.sha if self.culprit else None,
            "subject": self.culprit.subject if self.culprit else None,
            "pr_number": self.culprit.pr_number if self.culprit else None,
            "candidates": [c.sha for c in self.candidates],
            "culprit_result": measured(self.culprit_measurement),
            "parent_result": measured(self.parent_measurement),
            "steps": [{**asdict(s), "verdict": s.verdict.value} for s in self.steps],
            "executions": self.executions,
            "reused": self.reused,
        }


class BadEnd(UsageError):
    """An end of the range does not behave as the user said: a good end that fails, a bad end that passes."""


StepCallback = Callable[["Step", Measurement], None]


class BisectSession:
    def __init__(self, store: Store, repo: Repo, prober: Prober, on_step: StepCallback | None = None) -> None:
        self.store, self.repo, self.prober = store, repo, prober
        self.on_step = on_step

    def start(self, good_rev: str, bad_rev: str) -> BisectReport:
        good, bad = self.repo.resolve(good_rev), self.repo.resolve(bad_rev)
        candidates = [good, *self.repo.first_parent_range(good, bad)]
        session_id = self.store.start_session(
            self.prober.repo_id, self.prober.target.name, self.prober.probe_id, good, bad, STRATEGY
        )
        return self._drive(session_id, candidates)

    def resume(self) -> BisectReport:
        """Continue the newest unfinished session of this target and probe."""
        sessions = self.store.open_sessions(self.prober.repo_id, self.prober.target.name, self.prober.probe_id)
        if not sessions:
            raise UsageError(
                f"no unfinished bisect of probe {self.prober.probe.name!r} on target {self.prober.target.name!r}; "
                "start one with --good and --bad"
            )
        session = sessions[0]
        candidates = [session.good_sha, *self.repo.first_parent_range(session.good_sha, session.bad_sha)]
        return self._drive(session.id, candidates)

    def _drive(self, session_id: int, candidates: list[str]) -> BisectReport:
        executions_before, reused_before = self.prober.executions, self.prober.reused
        trees = self.prober.record_commits(candidates)
        index_of = {sha: i for i, sha in enumerate(candidates)}
        search = BinarySearch(len(candidates))
        steps = [Step(s.sha, Verdict(s.verdict), s.reused) for s in self.store.steps(session_id)]
        for step in steps:
            search.record(index_of[step.sha], step.verdict)
        measurements: dict[str, Measurement] = {}

        def probe(index: int) -> Measurement:
            sha = candidates[index]
            measurement = self.prober.measure(sha, trees[sha], session_id)
            measurements[sha] = measurement
            if index not in search.verdicts:
                self.store.add_step(session_id, sha, measurement.verdict.value, measurement.reused)
                steps.append(Step(sha, measurement.verdict, measurement.reused))
                search.record(index, measurement.verdict)
                if self.on_step is not None:
                    self.on_step(steps[-1], measurement)
            return measurement

        for index, expected in ((0, Verdict.GOOD), (len(candidates) - 1, Verdict.BAD)):
            measured = probe(index)
            if measured.verdict is not expected:
                self.store.finish_session(session_id, "failed", {"error": f"{candidates[index]} is {measured.verdict.value}"})
                raise BadEnd(_bad_end_message(self.prober.probe.name, expected, measured))
        while (index := search.next_index()) is not None:
            probe(index)
        answer = search.answer()
        culprit = candidates[answer.culprit] if answer.culprit is not None else None
        report = BisectReport(
            session_id=session_id,
            probe=self.prober.probe.name,
            good=candidates[0],
            bad=candidates[-1],
            culprit=self.store.commit(self.prober.repo_id, culprit) if culprit else None,
            candidates=[self.store.commit(self.prober.repo_id, candidates[i]) for i in answer.candidates],
            steps=steps,
        )
        if culprit is not None:
            parent = candidates[answer.culprit - 1]
            report.culprit_measurement = measurements.get(culprit) or probe(answer.culprit)
            report.parent_measurement = measurements.get(parent) or probe(answer.culprit - 1)
        report.executions = self.prober.executions - executions_before
        report.reused = self.prober.reused - reused_before
        self.store.finish_session(session_id, "done", report.to_json())
        return report


def _bad_end_message(probe: str, expected: Verdict, measured: Measurement) -> str:
    evidence = measured.signature or measured.verdict.value
    if expected is Verdict.GOOD:
        return (
            f"the good end {measured.sha[:12]} is {measured.verdict.value} under {probe} ({evidence}); "
            "pass an older --good that passes"
        )
    return (
        f"the bad end {measured.sha[:12]} is {measured.verdict.value} under {probe} ({evidence}); "
        "pass a --bad that fails"
    )
