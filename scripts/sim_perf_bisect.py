"""regtrack's metric bisect against a fixed-sample t-test bisect and against Otava on the whole
series, on synthetic histories with one known step.

    python3 -m venv /tmp/cp && /tmp/cp/bin/pip install apache-otava==0.8.0 ruptures
    PYTHONPATH=. /tmp/cp/bin/python scripts/sim_perf_bisect.py [--trials 100] [--seed 1]

Runs in a virtual environment of its own, as ``changepoint_compare.py`` does (Otava pins numpy
and scipy below what regtrack installs). Each history is 64 commits; the step, of the row's size,
lands at a commit drawn uniformly from 1..63; one execution at a commit gives one value, the
commit's level times log-normal noise of the row's level (the noise between executions, which is
what a metric's value per execution carries). The bisects go from commit 0 (good) to commit 63.

- regtrack: ``tracker.metric_bisect``'s search with its own parts (``tracker.perf``: the rank test
  at 99 %, a 5 % threshold, the margin of half the bad end's change, the sampling rule of 6
  executions a side up to 24, ambiguous steps skipped, the bad end judged first);
- t-test: a bisect with 10 executions at each revision, bad where Welch's one-sided t-test on the
  logs says slower at p < 0.01, good otherwise, as a fixed-sample bisect does;
- Otava: one execution at each of the 64 commits, ``compute_change_points`` (window 30,
  p < 0.001); right when a change point lands on the step's commit.

Per row and method: the share of histories whose answer is the step's commit ("right"), whose
answer is another commit ("wrong"), that say "no regression" or leave candidates ("none"), and
the executions spent on average. A step below regtrack's threshold (2 %) is, by its design, no
regression: "none" is its right answer there.
"""

from __future__ import annotations

import argparse
import math
import random
from collections.abc import Callable

import otava.analysis as otava
from scipy.stats import ttest_ind

from tracker.core.verdicts import Verdict
from tracker.perf.cases import CaseCalls, Margin, judge_cases, margin_of
from tracker.perf.rank import Call
from tracker.perf.sampling import SamplingRule
from tracker.search.binary import BinarySearch

COMMITS = 64
STEPS = (0.02, 0.05, 0.10, 0.20, 0.50)
NOISES = (0.01, 0.05, 0.10)
THRESHOLD, CONFIDENCE = 0.05, 0.99
FIXED_SAMPLES = 10


class History:
    """One synthetic history: ``execute(i)`` is one execution's value at commit ``i``."""

    def __init__(self, step: float, noise: float, draw: random.Random) -> None:
        self.at = draw.randint(1, COMMITS - 1)
        self.step, self.noise, self.draw = step, noise, draw
        self.executions = 0
        self.end: CaseCalls | None = None
        """The bad end's change, once regtrack's judge has measured it."""

    def execute(self, commit: int) -> float:
        self.executions += 1
        level = 1 + self.step if commit >= self.at else 1.0
        return 100 * level * math.exp(self.draw.gauss(0, self.noise))


Judge = Callable[[History, dict[int, list[float]], int, Margin | None], Verdict]


def sampled(history: History, kept: dict[int, list[float]], commit: int, count: int) -> list[float]:
    values = kept.setdefault(commit, [])
    while len(values) < count:
        values.append(history.execute(commit))
    return values


def regtrack_judge(history: History, kept: dict[int, list[float]], commit: int, margin: Margin | None) -> Verdict:
    """A step as ``tracker.metric_bisect`` judges it, with its parts."""
    rule, wanted = SamplingRule(), SamplingRule().first
    while True:
        good, step = sampled(history, kept, 0, wanted), sampled(history, kept, commit, wanted)
        judged = judge_cases({"v": good}, {"v": step}, threshold=THRESHOLD, confidence=CONFIDENCE, margin=margin)
        more = rule.more(min(len(good), len(step)), judged.call)
        if more is None:
            history.end = history.end or judged
            return {Call.SLOWER: Verdict.BAD, Call.NOT_SLOWER: Verdict.GOOD}.get(judged.call, Verdict.SKIP)
        wanted = more


def ttest_judge(history: History, kept: dict[int, list[float]], commit: int, _: Margin | None) -> Verdict:
    good, step = sampled(history, kept, 0, FIXED_SAMPLES), sampled(history, kept, commit, FIXED_SAMPLES)
    p = ttest_ind([math.log(v) for v in step], [math.log(v) for v in good], equal_var=False, alternative="greater")
    return Verdict.BAD if p.pvalue < 0.01 else Verdict.GOOD


def bisected(history: History, judge: Judge) -> int | None:
    """The first bad commit the search names, or None (no regression, or candidates)."""
    kept: dict[int, list[float]] = {}
    if judge(history, kept, COMMITS - 1, None) is not Verdict.BAD:
        return None
    margin = margin_of(history.end) if history.end is not None else None
    search = BinarySearch(COMMITS)
    search.record(0, Verdict.GOOD)
    search.record(COMMITS - 1, Verdict.BAD)
    while not search.done() and (pending := search.next_indices(1)):
        search.record(pending[0], judge(history, kept, pending[0], margin))
    return search.answer().culprit


def otava_answer(history: History) -> int | None:
    values = [history.execute(i) for i in range(COMMITS)]
    found, _ = otava.compute_change_points(values, window_len=30, max_pvalue=0.001)
    points = [point.index for point in found]
    return history.at if history.at in points else (points[0] if points else None)


METHODS: dict[str, Callable[[History], int | None]] = {
    "regtrack": lambda h: bisected(h, regtrack_judge),
    "t-test": lambda h: bisected(h, ttest_judge),
    "Otava": otava_answer,
}


def row(method: Callable[[History], int | None], step: float, noise: float, trials: int, seed: int) -> str:
    draw = random.Random(seed)
    right = wrong = none = executions = 0
    for _ in range(trials):
        history = History(step, noise, draw)
        answer = method(history)
        right += answer == history.at
        wrong += answer is not None and answer != history.at
        none += answer is None
        executions += history.executions
    return f"{right / trials:>5.2f} {wrong / trials:>5.2f} {none / trials:>5.2f} {executions / trials:>6.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    header = " | ".join(f"{name:>8} right wrong  none  execs" for name in METHODS)
    print(f" step noise | {header}")
    for noise in NOISES:
        for step in STEPS:
            cells = " | ".join(f"{'':>8} {row(m, step, noise, args.trials, args.seed)}" for m in METHODS.values())
            print(f"{step:>5.0%} {noise:>5.0%} | {cells}")


if __name__ == "__main__":
    main()
