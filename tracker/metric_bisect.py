"""``regtrack bisect --metric PROBE:METRIC``: the first commit that made a metric slower.

The unit of evidence is one execution (``tracker.metric_samples``). Set against the good end's
values by the rank test (``tracker.perf``), a step is bad when slower by more than the threshold,
good when not, and while unclear it is measured again, one execution at a time, up to the
sampling rule's bound; a step still unclear there is ambiguous and goes to the search as
untestable, as ``git bisect skip`` does, so that an ambiguous neighbour leaves candidates rather
than a wrong culprit. A bisect asked again, or started again after a crash, spends only what the
store lacks.

The bad end is judged first: where it is not shown slower than the good end by more than the
threshold, the answer is "no regression" and nothing else runs. The culprit's effect is its
samples against its parent's, with the interval; it is checked by measuring the bad end with the
culprit reverted, which must not be slower than the good end. With ``find_fix`` the line runs
from the slow ``bad`` end to the fast ``good`` one, and the answer is the first commit after which
the metric is no longer slower.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from tracker.bisect_options import searched
from tracker.core.errors import UsageError
from tracker.core.exits import ExitStatus
from tracker.core.metrics import Metric
from tracker.core.records import CommitInfo
from tracker.core.verdicts import Verdict
from tracker.core.verification import Verification, VerificationStatus
from tracker.measure import Prober
from tracker.metric_samples import NoSamples, Sampler
from tracker.perf.cases import CaseCalls, Margin, Samples, fewest, judge_cases, margin_of
from tracker.perf.rank import Call, Effect
from tracker.perf.sampling import SamplingRule
from tracker.probing import DEFAULT_EXECUTION, QUIET, Selection, Watch, subjects
from tracker.search.binary import BinarySearch
from tracker.search.transitions import group_runs
from tracker.targets.revert import Conflict, RevertFailed, revert_on
from tracker.workspace import ExecutionOptions, Workspace

DEFAULT_THRESHOLD = 0.05
DEFAULT_CONFIDENCE = 0.99


def parse_metric(spec: str) -> tuple[str, str]:
    """``PROBE:METRIC`` as its two names."""
    probe, _, metric = spec.partition(":")
    if not probe or not metric:
        raise UsageError(f"--metric {spec!r} is not PROBE:METRIC; pass e.g. --metric demo_latency:decode_us")
    return probe, metric


def parse_threshold(text: str) -> float:
    """``5%`` or ``0.05`` as the fraction 0.05."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(%?)\s*", text)
    value = float(match.group(1)) / (100 if match.group(2) else 1) if match else -1.0
    if not 0 <= value < 1:
        raise UsageError(f"--threshold {text!r} is not a fraction below 1; pass e.g. --threshold 5% or 0.05")
    return value


@dataclass(frozen=True)
class MetricQuestion:
    """What is bisected: ``metric`` of the prober's probe, slower by more than ``threshold`` (a
    fraction) at ``confidence``, sampled by ``rule``."""

    metric: Metric
    threshold: float = DEFAULT_THRESHOLD
    confidence: float = DEFAULT_CONFIDENCE
    rule: SamplingRule = field(default_factory=SamplingRule)

    def judge(self, good: Samples, step: Samples, margin: Margin | None = None) -> CaseCalls:
        return judge_cases(
            good,
            step,
            threshold=self.threshold,
            confidence=self.confidence,
            direction=self.metric.direction,
            margin=margin,
        )


def metric_of(prober: Prober, name: str) -> Metric:
    """The probe's declared metric called ``name``."""
    declared = {metric.name: metric for metric in prober.probe.metrics}
    if name not in declared:
        said = f"declares {', '.join(declared)}" if declared else "is no metric probe (it declares no metrics)"
        raise UsageError(f"probe {prober.probe.name!r} {said}; pass --metric {prober.probe.name}:<one of its metrics>")
    return declared[name]


@dataclass(frozen=True)
class MetricStep:
    """One revision judged: its call against the good end, the executions it took, and the worst
    case's change (None where untestable)."""

    sha: str
    verdict: Verdict
    call: Call | None
    executions: int
    effect: Effect | None
    reason: str | None = None

    @property
    def change(self) -> str:
        return self.effect.said() if self.effect else "not measured"

    def to_json(self) -> dict[str, object]:
        effect = _effect_json(self.effect)
        call = self.call.value if self.call else None
        return {"sha": self.sha, "verdict": self.verdict.value, "call": call, "executions": self.executions, **effect}


@dataclass
class MetricBisectReport:
    """``good`` is the fast end and ``bad`` the slow one, in either direction; ``end_effect`` the
    bad end's change against the good end. ``no_regression``: the bad end is not shown slower by
    more than the threshold, so nothing was searched."""

    probe: str
    metric: Metric
    threshold: float
    confidence: float
    good: str
    bad: str
    find_fix: bool
    end_effect: Effect
    end_call: Call
    no_regression: bool = False
    culprit: CommitInfo | None = None
    candidates: list[CommitInfo] = field(default_factory=list)
    culprit_effect: Effect | None = None
    steps: list[MetricStep] = field(default_factory=list)
    executions: int = 0
    reused: int = 0
    verification: Verification | None = None

    @property
    def exit_status(self) -> ExitStatus:
        return ExitStatus.BAD if self.culprit or self.candidates else ExitStatus.OK

    @property
    def found(self) -> str:
        return "first commit no longer slower" if self.find_fix else "first slower commit"

    def to_json(self) -> dict[str, object]:
        return {
            "probe": self.probe,
            "metric": self.metric.name,
            "unit": self.metric.unit,
            "direction": self.metric.direction.value,
            "threshold": self.threshold,
            "confidence": self.confidence,
            "good": self.good,
            "bad": self.bad,
            "find_fix": self.find_fix,
            "found": self.found,
            "no_regression": self.no_regression,
            "end": {"call": self.end_call.value, **_effect_json(self.end_effect)},
            "culprit": self.culprit.sha if self.culprit else None,
            "subject": self.culprit.subject if self.culprit else None,
            "candidates": [c.sha for c in self.candidates],
            "culprit_effect": _effect_json(self.culprit_effect) if self.culprit_effect else None,
            "steps": [step.to_json() for step in self.steps],
            "executions": self.executions,
            "reused": self.reused,
            "verification": self.verification.to_json() if self.verification else None,
        }


StepTold = Callable[[MetricStep], None]


class MetricBisection:
    """Bisects ``question`` over ``prober``'s target; ``told`` hears each step as it is judged."""

    def __init__(self, prober: Prober, question: MetricQuestion, told: StepTold | None = None) -> None:
        self.prober, self.question, self.told = prober, question, told
        self.sampler = Sampler(prober, question.metric.name)
        self._margin: Margin | None = None
        """Half the bad end's change, once it is measured (``tracker.perf.cases``)."""

    def run(self, good_rev: str, bad_rev: str, find_fix: bool = False, verify: bool = True) -> MetricBisectReport:
        repo = self.prober.repo
        good, bad = repo.resolve(good_rev), repo.resolve(bad_rev)
        old, new = (bad, good) if find_fix else (good, bad)
        if old == new or not repo.is_ancestor(old, new):
            raise UsageError(_order_message(good, bad, find_fix))
        line = [old, *repo.first_parent_range(old, new)]
        trees = self.prober.record_commits(line)
        runs = group_runs([trees[sha] for sha in line])
        # one candidate a run of commits with one tree, named by its first commit; the ends are
        # measured as given (the same tree as their run's first commit)
        self._candidates = [line[run.start] for run in runs]
        shas = [old, *self._candidates[1:-1], new]
        executions = self.prober.executions
        report = self._search(shas, [trees[sha] for sha in shas], good, bad, find_fix)
        if verify and report.culprit is not None and not find_fix:
            report.verification = self._verify(report.culprit, bad)
        report.executions = self.prober.executions - executions
        report.reused = self.sampler.reused
        return report

    def _search(self, shas: list[str], trees: list[str], good: str, bad: str, find_fix: bool) -> MetricBisectReport:
        good_index, bad_index = (len(shas) - 1, 0) if find_fix else (0, len(shas) - 1)
        self._good_sha, self._good_tree = shas[good_index], trees[good_index]
        first = self.sampler.draw(self._good_sha, self._good_tree, self.question.rule.first)
        if isinstance(first, NoSamples):
            raise UsageError(f"the good end {good[:12]} cannot be measured: {first.reason}; pass another --good")
        self._good_samples: Samples = first
        kept: dict[int, Samples] = {}
        end = self._judged(bad_index, shas, trees, kept)
        if end.call is None:
            raise UsageError(f"the bad end {bad[:12]} cannot be measured: {end.reason}; pass another --bad")
        q = self.question
        report = MetricBisectReport(
            self.prober.probe.name, q.metric, q.threshold, q.confidence, good, bad, find_fix, end.effect, end.call
        )
        report.steps.append(end)
        if end.verdict is not Verdict.BAD:
            report.no_regression = True
            return report
        self._margin = margin_of(self.question.judge(self._good_samples, kept[bad_index]))
        search = BinarySearch(len(shas))
        search.record(0, Verdict.GOOD)
        search.record(len(shas) - 1, Verdict.BAD)
        while not search.done() and (pending := search.next_indices(1)):
            step = self._judged(pending[0], shas, trees, kept)
            report.steps.append(step)
            search.record(pending[0], searched(step.verdict, find_fix))
        kept[good_index] = self._good_samples
        answer = search.answer()
        report.candidates = [self._commit(self._candidates[i]) for i in answer.candidates]
        if answer.culprit is not None:
            report.culprit = self._commit(self._candidates[answer.culprit])
            before, after = kept.get(answer.culprit - 1), kept.get(answer.culprit)
            if before is not None and after is not None:
                report.culprit_effect = self.question.judge(before, after).largest[1].effect
        return report

    def _judged(self, index: int, shas: list[str], trees: list[str], kept: dict[int, Samples]) -> MetricStep:
        step, samples = self._judge(shas[index], trees[index])
        if samples is not None:
            kept[index] = samples
        if self.told is not None:
            self.told(step)
        return step

    def _judge(self, sha: str, tree: str) -> tuple[MetricStep, Samples | None]:
        """The revision against the good end, both sampled as the rule asks, with its samples."""
        rule, wanted = self.question.rule, self.question.rule.first
        while True:
            samples = self.sampler.draw(sha, tree, wanted)
            if isinstance(samples, NoSamples):
                return MetricStep(sha, Verdict.SKIP, None, 0, None, samples.reason), None
            good = self.sampler.draw(self._good_sha, self._good_tree, wanted)
            if not isinstance(good, NoSamples):
                self._good_samples = good
            calls = self.question.judge(self._good_samples, samples, self._margin)
            have = min(fewest(samples), fewest(self._good_samples))
            more = rule.more(have, calls.call)
            if more is None or have < wanted:
                # decided, unclear at the rule's bound, or no new attempt adds samples
                verdict = {Call.SLOWER: Verdict.BAD, Call.NOT_SLOWER: Verdict.GOOD}.get(calls.call, Verdict.SKIP)
                return MetricStep(sha, verdict, calls.call, fewest(samples), calls.worst[1].effect), samples
            wanted = more

    def _verify(self, culprit: CommitInfo, bad: str) -> Verification:
        """The bad end measured with the culprit reverted: not slower than the good end confirms it."""
        probe, c, b = self.prober.probe.name, culprit.sha[:12], bad[:12]
        paths = self.prober.target.paths
        try:
            reverted = revert_on(self.prober.repo.path, culprit.sha, bad, culprit.subject, paths)
        except RevertFailed as failure:
            said = f"the check could not write {b} without {c}: {failure}"
            return Verification(VerificationStatus.UNTESTABLE, probe, culprit.sha, bad, said)
        if isinstance(reverted, Conflict):
            said = f"{c}'s change no longer applies on {b} (conflicts in {', '.join(reverted.paths)}); not checked"
            return Verification(
                VerificationStatus.DOES_NOT_APPLY, probe, culprit.sha, bad, said, conflicts=reverted.paths
            )
        tree = self.prober.record_commits([reverted.sha])[reverted.sha]
        step, _ = self._judge(reverted.sha, tree)
        metric, change = self.question.metric.name, step.change
        if step.verdict is Verdict.GOOD:
            status = VerificationStatus.CONFIRMED
            said = f"{b} without {c} is not slower than the good end ({metric} {change}): {c} is what slows it"
        elif step.verdict is Verdict.BAD:
            status = VerificationStatus.NOT_CONFIRMED
            said = f"{b} without {c} is still slower ({metric} {change}): a later commit slows it too"
        else:
            status = VerificationStatus.UNTESTABLE
            said = (
                f"{b} without {c}: {step.reason or f'unclear after {step.executions} executions ({metric} {change})'}"
            )
        return Verification(status, probe, culprit.sha, bad, said, checked=reverted.sha, verdict=step.verdict)

    def _commit(self, sha: str) -> CommitInfo:
        info = self.prober.store.commit(self.prober.repo_id, sha)
        assert info is not None, "record_commits stored every commit of the line"
        return info


def _order_message(good: str, bad: str, find_fix: bool) -> str:
    if find_fix:
        return (
            f"with --find-fix, --bad {bad[:12]} (where the metric is slow) must be older than --good {good[:12]}; "
            "pass a --good from the later history of --bad"
        )
    return f"--good {good[:12]} is not an older first-parent ancestor of --bad {bad[:12]}; pass an older --good"


def _effect_json(effect: Effect | None) -> dict[str, float | None]:
    if effect is None:
        return {"change": None, "change_low": None, "change_high": None}
    return {"change": effect.estimate, "change_low": effect.low, "change_high": effect.high}


def bisect_metric(
    selection: Selection,
    spec: str,
    good: str,
    bad: str,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    find_fix: bool = False,
    options: ExecutionOptions = DEFAULT_EXECUTION,
    watch: Watch = QUIET,
    verify: bool = True,
) -> MetricBisectReport:
    """The Python API of ``regtrack bisect --metric PROBE:METRIC``: the first commit after ``good``
    up to ``bad`` (first-parent) slower by more than ``threshold``, or with ``find_fix`` the first
    one after ``bad`` no longer slower, up to ``good``."""
    probe_name, metric_name = parse_metric(spec)
    with Workspace.open(selection.repo, selection.target) as ws:
        probe = ws.probe(probe_name)
        with options.executor(ws.config.executor) as executor:
            prober = Prober.open(ws, probe, executor, "bisect", options.seed, selection.fresh)
            question = MetricQuestion(metric_of(prober, metric_name), threshold)
            watch.started(f"bisect {probe.name}:{metric_name}")
            subject = subjects(ws, prober.repo_id)

            def told(step: MetricStep) -> None:
                how = f"{step.call.value}, {step.executions} executions" if step.call else step.reason
                watch.notice(f"{step.sha[:12]} {step.verdict.value} ({how}; {step.change}) {subject(step.sha)}")

            return MetricBisection(prober, question, told).run(good, bad, find_fix, verify)
