"""One metric's values at revisions, through a ``Prober``: the unit is one execution.

Each case of each complete attempt at a revision's tree gives one value, the median of the
``repeat`` samples it stored: the samples of one process share that process's speed (on the CPU
machine, seven processes timing one demo tree gave per-process medians from 1.6 to 3.4 ms, while
within a process they spread by a few percent), so they are not independent draws, and a rank
test over pooled samples called an unchanged tree 44 % slower. Every complete stored attempt
counts, so what was measured once is never measured again to be judged.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median

from tracker.core.verdicts import Outcome
from tracker.measure import Prober
from tracker.perf.cases import Samples, fewest


@dataclass(frozen=True)
class NoSamples:
    """A revision whose probe did not pass, so its samples say nothing."""

    reason: str


class Sampler:
    """One metric at revisions through ``prober``: a value per case of every complete stored
    attempt (the median of its samples), and new attempts while a revision has fewer than it is
    asked for."""

    def __init__(self, prober: Prober, metric: str) -> None:
        self.prober, self.metric = prober, metric
        self.reused = 0
        """Executions that were stored before this sampler first looked at their tree."""
        self._seen: set[str] = set()

    def stored(self, tree: str) -> Samples | NoSamples:
        pooled: dict[str, list[float]] = {case: [] for case in self.prober.case_ids}
        for attempt in self.prober.attempts(tree):
            if not attempt.complete(self.prober.case_ids):
                continue
            for case, run in attempt.runs.items():
                if case not in pooled:
                    continue
                if run.outcome is not Outcome.PASS:
                    return NoSamples(f"{case}: {run.outcome.value} ({run.signature or 'no signature'})")
                if values := run.samples.get(self.metric):
                    pooled[case].append(median(values))
        return pooled

    def draw(self, sha: str, tree: str, at_least: int) -> Samples | NoSamples:
        """At least ``at_least`` values a case (fewer only where a new attempt adds none)."""
        while True:
            samples = self.stored(tree)
            if tree not in self._seen and not isinstance(samples, NoSamples):
                self._seen.add(tree)
                self.reused += fewest(samples)
            if isinstance(samples, NoSamples) or fewest(samples) >= at_least:
                return samples
            before = self.prober.executions
            self.prober.measure(sha, tree, rerun=fewest(samples) > 0)
            if self.prober.executions == before:
                return samples
