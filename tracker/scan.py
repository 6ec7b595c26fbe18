"""Every transition of each probe along a first-parent range, with reverts and re-lands paired.

Sampling policy. A probe's result can only change where the target tree changes, so the range is
first cut into runs of commits with one target tree, and a run is measured once (stored results
are reused). When the range has at most ``max_samples`` runs, every run is measured: no island is
missed, however short (the two good commits between a fix and its revert included). Above that,
the first and last runs, every ``stride``-th run and every run holding a revert (and the run
before it) are measured, then each stretch between two measured runs that disagree is bisected.
That can miss an island shorter than the stride whose two ends agree and that no revert marks;
measuring every run (``--max-samples`` at least the number of runs) never misses one, at one
execution per distinct target tree.

A run whose result is bad is rerun ``confirm`` times with fresh seeds before a transition to or
from it is reported (not for a deterministic probe, whose rerun would repeat it exactly); a run that both passes and fails is flaky, and is reported as a flaky
stretch, never as a clean transition. Untestable runs are reported as untestable stretches.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracker.core.records import CommitInfo
from tracker.core.verdicts import Verdict
from tracker.measure import Measurement, Prober
from tracker.search.pairing import Pair, pair_transitions
from tracker.search.transitions import Kind, State, find_transitions, group_runs
from tracker.targets.revisions import FETCH_MORE, Repo, cut_at

MAX_SAMPLES = 64
CONFIRM_RUNS = 2


@dataclass(frozen=True)
class ScanTransition:
    probe: str
    commit: CommitInfo
    kind: Kind
    pair: Pair | None
    candidates: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "probe": self.probe,
            "sha": self.commit.sha,
            "kind": self.kind.value,
            "subject": self.commit.subject,
            "pr_number": self.commit.pr_number,
            "pairs_with": self.pair.sha if self.pair else None,
            "pair_kind": self.pair.kind if self.pair else None,
            "candidates": list(self.candidates),
        }


@dataclass(frozen=True)
class ScanStretch:
    probe: str
    kind: State
    first: str
    last: str

    def to_json(self) -> dict[str, Any]:
        return {"probe": self.probe, "kind": "untestable" if self.kind is State.SKIP else "flaky", "first": self.first, "last": self.last}


@dataclass
class ProbeScan:
    probe: str
    states: list[State | None]
    transitions: list[ScanTransition] = field(default_factory=list)
    stretches: list[ScanStretch] = field(default_factory=list)


@dataclass
class ScanReport:
    line: list[CommitInfo]
    probes: list[ProbeScan]
    executions: int = 0
    reused: int = 0

    @property
    def transitions(self) -> list[ScanTransition]:
        return [t for scan in self.probes for t in scan.transitions]

    def to_json(self) -> dict[str, Any]:
        return {
            "first": self.line[0].sha,
            "last": self.line[-1].sha,
            "commits": len(self.line),
            "transitions": [t.to_json() for t in self.transitions],
            "stretches": [s.to_json() for scan in self.probes for s in scan.stretches],
            "stories": {scan.probe: story(scan, self.line) for scan in self.probes},
            "executions": self.executions,
            "reused": self.reused,
        }


@dataclass(frozen=True)
class ScanStep:
    """One measurement, for progress: step ``number`` of ``estimate`` (every probe's initial
    samples plus the refinements and confirmations so far; ``final`` when no more can come),
    and the distinct target trees measured so far of ``trees`` in the range, over all probes."""

    probe: str
    sha: str
    verdict: Verdict
    reused: bool
    rerun: bool
    seconds: float
    signature: str | None
    number: int
    estimate: int
    final: bool
    trees_measured: int
    trees: int


Progress = Callable[[ScanStep], None]


class Scanner:
    def __init__(self, repo: Repo, probers: Sequence[Prober], max_samples: int = MAX_SAMPLES, confirm: int = CONFIRM_RUNS, progress: Progress | None = None) -> None:
        self.repo, self.probers = repo, list(probers)
        self.max_samples, self.confirm = max_samples, confirm
        self.progress = progress or (lambda _: None)
        self._steps = self._planned = self._trees = 0
        self._final = self._sampling = False
        self._measured: set[tuple[str, int]] = set()

    def scan(self, line: list[str]) -> ScanReport:
        trees = self.probers[0].record_commits(line)
        infos = self.repo.commit_infos(line)
        runs = group_runs([trees[sha] for sha in line])
        self._planned = len(self._initial_samples(runs, infos)) * len(self.probers)
        self._trees = len(runs) * len(self.probers)
        self._final = all(self._confirmations(p) == 0 for p in self.probers) and len(runs) <= self.max_samples
        before = [(p.executions, p.reused) for p in self.probers]
        scans = [self._scan_probe(prober, line, infos, [trees[sha] for sha in line]) for prober in self.probers]
        report = ScanReport(infos, scans)
        report.executions = sum(p.executions - e for p, (e, _) in zip(self.probers, before))
        report.reused = sum(p.reused - r for p, (_, r) in zip(self.probers, before))
        return report

    def _scan_probe(self, prober: Prober, line: list[str], infos: list[CommitInfo], trees: list[str]) -> ProbeScan:
        runs = group_runs(trees)
        states: dict[int, State] = {}

        def measure(group: int, rerun: bool = False) -> State:
            sha = line[runs[group].start]
            started = time.perf_counter()
            measurement = prober.measure(sha, trees[runs[group].start], rerun=rerun)
            states[group] = state_of(prober.attempt_verdicts(trees[runs[group].start]))
            self._report(prober.probe.name, group, measurement, rerun, time.perf_counter() - started)
            return states[group]

        self._sampling = True
        for group in self._initial_samples(runs, infos):
            measure(group)
        self._sampling = False
        self._refine(runs, states, measure)
        confirm = self._confirmations(prober)
        self._confirm(runs, states, measure, lambda group: len(prober.attempt_verdicts(trees[runs[group].start])), confirm)
        ordered = sorted(states)
        found, stretches = find_transitions([states[g] for g in ordered])
        commit_of = [runs[g].start for g in ordered]
        indices = [commit_of[t.index] for t in found]
        pairs = pair_transitions(infos, trees, indices, lambda sha: self.repo.patch_id(sha, prober.target.paths))
        per_commit: list[State | None] = [None] * len(line)
        for group, state in states.items():
            for index in runs[group]:
                per_commit[index] = state
        scan = ProbeScan(prober.probe.name, per_commit)
        for t, index in zip(found, indices):
            hidden = [line[i] for position in t.candidates[:-1] for i in runs[ordered[position]]]
            candidates = (*hidden, line[index])
            scan.transitions.append(ScanTransition(prober.probe.name, infos[index], t.kind, pairs.get(index), candidates))
        for s in stretches:
            first, last = runs[ordered[s.first]].start, runs[ordered[s.last]].stop - 1
            scan.stretches.append(ScanStretch(prober.probe.name, s.kind, line[first], line[last]))
        return scan

    def _report(self, probe: str, group: int, measurement: Measurement, rerun: bool, seconds: float) -> None:
        self._steps += 1
        self._planned += not self._sampling
        self._measured.add((probe, group))
        self.progress(
            ScanStep(
                probe,
                measurement.sha,
                measurement.verdict,
                measurement.reused,
                rerun,
                seconds,
                measurement.signature,
                number=self._steps,
                estimate=self._planned,
                final=self._final,
                trees_measured=len(self._measured),
                trees=self._trees,
            )
        )

    def _initial_samples(self, runs: list[range], infos: list[CommitInfo]) -> list[int]:
        if len(runs) <= self.max_samples:
            return list(range(len(runs)))
        stride = -(-len(runs) // self.max_samples)
        group_of = {i: g for g, run in enumerate(runs) for i in run}
        marked = {g for i, c in enumerate(infos) if c.reverts_sha or c.subject.startswith('Revert "') for g in (group_of[i], max(group_of[i] - 1, 0))}
        return sorted({0, len(runs) - 1, *range(0, len(runs), stride), *marked})

    def _refine(self, runs: list[range], states: dict[int, State], measure: Callable[[int], State]) -> None:
        """Bisect every stretch of unmeasured runs between two measured runs that disagree."""
        while True:
            judged = [g for g in sorted(states) if states[g] in (State.GOOD, State.BAD)]
            gaps = [
                [g for g in range(a + 1, b) if g not in states]
                for a, b in zip(judged, judged[1:])
                if states[a] is not states[b]
            ]
            gaps = [gap for gap in gaps if gap]
            if not gaps:
                return
            for gap in gaps:
                measure(gap[(len(gap) - 1) // 2])

    def _confirmations(self, prober: Prober) -> int:
        return 0 if prober.probe.deterministic else self.confirm

    def _confirm(self, runs: list[range], states: dict[int, State], measure: Callable[..., State], attempts: Callable[[int], int], confirm: int) -> None:
        """Rerun every bad run next to a transition until it has ``1 + confirm`` attempts, so a
        flaky one is not taken for a clean one; attempts stored earlier count."""
        ordered = sorted(states)
        found, _ = find_transitions([states[g] for g in ordered])
        sides = {ordered[i] for t in found for i in (t.index, t.candidates[0] - 1) if 0 <= i < len(ordered)}
        for group in sorted(g for g in sides if states[g] is State.BAD):
            while states[group] is State.BAD and attempts(group) < 1 + confirm:
                measure(group, rerun=True)


def history_cut_warning(repo: Repo, line: Sequence[str]) -> str | None:
    """One line when ``line`` reaches where a shallow clone's history is cut, so that its scan is not
    taken for one of the whole history."""
    cut = repo.history_cut(line)
    return f"{cut_at(cut)}: the commits before it are missing, so the scan starts there; {FETCH_MORE}" if cut else None


def state_of(verdicts: list[Verdict]) -> State:
    """A tree's state from the verdicts of its attempts: judged attempts that disagree make it flaky."""
    judged = {v for v in verdicts if v is not Verdict.SKIP}
    if len(judged) > 1:
        return State.FLAKY
    if not judged:
        return State.SKIP
    return State.GOOD if judged == {Verdict.GOOD} else State.BAD


def story(scan: ProbeScan, line: list[CommitInfo]) -> str:
    """The probe's history, newest first: "bad since R (reverts F, #n); fixed before by F; first broken by X"."""
    if not scan.transitions:
        states = {s for s in scan.states if s is not None}
        return "no transition: " + ("bad throughout" if states == {State.BAD} else "good throughout" if State.GOOD in states else "untestable")
    parts = []
    for position, t in enumerate(reversed(scan.transitions)):
        pr = f", #{t.commit.pr_number}" if t.commit.pr_number else ""
        paired = f" ({t.pair.kind} {t.pair.sha[:12]}{pr})" if t.pair else (f" (#{t.commit.pr_number})" if t.commit.pr_number else "")
        where = t.commit.sha[:12] if len(t.candidates) == 1 else f"one of {len(t.candidates)} commits up to {t.commit.sha[:12]}"
        if position == 0:
            parts.append(f"{'bad' if t.kind is Kind.REGRESSION else 'good'} since {where}{paired}")
        elif position == len(scan.transitions) - 1 and t.kind is Kind.REGRESSION:
            parts.append(f"first broken by {where}{paired}")
        else:
            parts.append(f"{'broken' if t.kind is Kind.REGRESSION else 'fixed'} before by {where}{paired}")
    return "; ".join(parts)
