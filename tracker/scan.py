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
from it is reported (not for a deterministic probe, whose rerun would repeat it exactly, unless a
worker died in it: a crash or a timeout is rerun once, and a pass then makes the tree flaky); a run
that both passes and fails is flaky, and is reported as a flaky stretch, never as a clean
transition. Untestable runs are reported as untestable stretches.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tracker.core.measurements import Measurement
from tracker.core.records import CommitInfo, StretchRecord, TransitionRecord, stretch_kind
from tracker.core.results import ProbeScan, ScanReport
from tracker.core.verdicts import State, Verdict, state_of
from tracker.measure import Prober
from tracker.metric_history import metric_history
from tracker.search.pairing import Pair, is_revert, pair_transitions
from tracker.search.transitions import IndexStretch, IndexTransition, find_transitions, group_runs
from tracker.targets.revisions import FETCH_MORE, Repo, cut_at

MAX_SAMPLES = 64
CONFIRM_RUNS = 2


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
    """Scans lines of commits with ``probers``; ``trigger`` names what scanned (``scan`` or
    ``track``) in the transitions it finds."""

    def __init__(
        self,
        repo: Repo,
        probers: Sequence[Prober],
        max_samples: int = MAX_SAMPLES,
        confirm: int = CONFIRM_RUNS,
        progress: Progress | None = None,
        trigger: str = "scan",
    ) -> None:
        self.repo, self.probers = repo, list(probers)
        self.max_samples, self.confirm, self.trigger = max_samples, confirm, trigger
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

        def reruns(group: int) -> int:
            """Attempts a bad group still needs: ``confirm`` reruns, or for a deterministic probe one
            where a worker died (its rerun may well pass)."""
            tree = trees[runs[group].start]
            wanted = 1 if prober.probe.deterministic and prober.died(tree) else self._confirmations(prober)
            return 1 + wanted - len(prober.attempt_verdicts(tree))

        self._confirm(runs, states, measure, reruns)
        return self._probe_scan(prober, infos, trees, runs, states)

    def _probe_scan(
        self, prober: Prober, infos: list[CommitInfo], trees: list[str], runs: list[range], states: dict[int, State]
    ) -> ProbeScan:
        """The measured runs' states as commit-level transitions, paired, and stretches."""
        ordered = sorted(states)
        found, stretches = find_transitions([states[g] for g in ordered])
        commit_of = [runs[g].start for g in ordered]
        indices = [commit_of[t.index] for t in found]
        pairs = pair_transitions(infos, trees, indices, lambda sha: self.repo.patch_id(sha, prober.target.paths))
        per_commit: list[State | None] = [None] * len(infos)
        for group, state in states.items():
            for index in runs[group]:
                per_commit[index] = state
        name = prober.probe.name
        scan = ProbeScan(name, per_commit)
        for t, index in zip(found, indices):
            hidden = [runs[ordered[position]] for position in t.candidates[:-1]]
            scan.transitions.append(self._transition(name, t, infos, index, hidden, pairs.get(index)))
        scan.stretches = [_stretch(name, s, infos, [runs[g] for g in ordered]) for s in stretches]
        if prober.probe.metrics:
            measured = [(infos[runs[g].start].sha, trees[runs[g].start]) for g in ordered]
            scan.changes, scan.noise = metric_history(prober, measured)
        return scan

    def _transition(
        self,
        probe: str,
        t: IndexTransition,
        infos: list[CommitInfo],
        index: int,
        hidden: list[range],
        pair: Pair | None,
    ) -> TransitionRecord:
        """``hidden`` holds the runs of commits that may hide the transition, before commit ``index``."""
        commit = infos[index]
        return TransitionRecord(
            probe=probe,
            sha=commit.sha,
            kind=t.kind,
            pairs_with=pair.sha if pair else None,
            pair_kind=pair.kind if pair else None,
            candidates=(*(infos[i].sha for run in hidden for i in run), commit.sha),
            authored_at=commit.authored_at,
            trigger=self.trigger,
        )

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
        marked = {g for i, c in enumerate(infos) if is_revert(c) for g in (group_of[i], max(group_of[i] - 1, 0))}
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

    def _confirm(
        self,
        runs: list[range],
        states: dict[int, State],
        measure: Callable[..., State],
        reruns: Callable[[int], int],
    ) -> None:
        """Rerun every bad run next to a transition while it needs more attempts, so a flaky one
        is not taken for a clean one; attempts stored earlier count."""
        ordered = sorted(states)
        found, _ = find_transitions([states[g] for g in ordered])
        sides = {ordered[i] for t in found for i in (t.index, t.candidates[0] - 1) if 0 <= i < len(ordered)}
        for group in sorted(g for g in sides if states[g] is State.BAD):
            while states[group] is State.BAD and reruns(group) > 0:
                measure(group, rerun=True)


def history_cut_warning(repo: Repo, line: Sequence[str]) -> str | None:
    """One line when ``line`` reaches where a shallow clone's history is cut, so that its scan is not
    taken for one of the whole history."""
    cut = repo.history_cut(line)
    return f"{cut_at(cut)}: the commits before it are missing, so the scan starts there; {FETCH_MORE}" if cut else None


def _stretch(probe: str, s: IndexStretch, infos: list[CommitInfo], measured: list[range]) -> StretchRecord:
    """``measured[i]`` is the run of commits behind position ``i`` of the stretch's line."""
    first, last = infos[measured[s.first].start], infos[measured[s.last].stop - 1]
    return StretchRecord(probe, stretch_kind(s.kind), first.sha, last.sha)
