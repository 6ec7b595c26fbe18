"""Change-point detectors on the same series: Otava, asv unweighted and weighted, ruptures.

    python3 -m venv /tmp/cp && /tmp/cp/bin/pip install apache-otava==0.8.0 asv==0.6.6 ruptures
    PYTHONPATH=. /tmp/cp/bin/python scripts/changepoint_compare.py [--trials 40] [--seed 1] [--long 7000]

Runs in a virtual environment of its own: Otava pins numpy and scipy below what regtrack installs.
Each series is 60 commits, each commit's value the median of its 5 samples with log-normal noise of
the row's level, and one step of the row's size at commit 30 (none at 0 %). Every detector sees the
same series. For each: the share of series whose change points include one within a commit of the
step ("det"), the change points per series anywhere else ("fp"), and milliseconds per series.

Columns:

- Otava: ``compute_change_points`` with a window of 30 and p < 0.001 (its defaults but the window).
- asv: every boundary between the steps of ``detect_steps(values)``, no weights.
- asv w: the same with weights, ``detect_steps(values, weights)``, each commit's weight made as
  asv's own ``publish`` makes it: ``asv._stats.get_weight`` of the stats that
  ``asv_runner.statistics.compute_stats`` gives for the commit's 5 samples, that is 2 / the width of
  the median's 99 % interval (for 5 samples the top is the largest sample and the bottom comes from
  a Laplace posterior). asv's fit is a weighted L1 (Potts) one, so a weight scales absolute, not
  squared, deviations: it is 1 / a spread, not 1 / a variance. A weight asv cannot make (zero
  width) counts as missing and ``detect_steps`` puts the median weight in its place.
- ruptures: regtrack's own candidates (``tracker.perf.changepoints.candidates``): PELT with the
  L2 (mean-shift) cost on the log of each commit's median, segments of one commit or more, run as
  ``KernelCPD(kernel="linear")``, ruptures' C PELT for the cost of ``Pelt(model="l2", jump=1)``
  (the same change points, faster). Penalty, fixed beforehand and blind to the step:
  ``pen = 2 * ln(n) * sigma**2`` (BIC for a mean shift of known variance: 2 parameters a change),
  with ``sigma = 1.4826 * MAD(diff(values)) / sqrt(2)`` from the series' first differences. These
  are candidates only: regtrack confirms each by the rank test, which this table does not.
  Tried and left out: ``Binseg(model="l2")`` with the same penalty finds the step as often with a
  few fewer false candidates but takes 3-7 ms a series against 0.1-0.2 ms; the Python
  ``Pelt(model="l2")`` takes 20-50 ms a series and 10 s on 1,000 commits.

For asv, weights of 1 / variance (MAD of the 5 samples) instead of asv's own give 0.8-0.9 false
change points a step-free series: asv's L1 fit wants 1 / spread.

``--long N`` also times each detector once on one step-free series of N commits at 5 % noise.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time
from collections.abc import Callable

import asv.step_detect as asv_steps
import otava.analysis as otava
from asv._stats import get_weight
from asv_runner.statistics import compute_stats

from tracker.perf.changepoints import candidates

COMMITS, AT, PER_COMMIT = 60, 30, 5
STEPS = (0.0, 0.02, 0.05, 0.10, 0.20, 0.50)
NOISES = (0.01, 0.05, 0.10)

Samples = list[list[float]]
Detector = Callable[[list[float], Samples], list[int]]


def series(step: float, noise: float, draw: random.Random, commits: int = COMMITS) -> tuple[list[float], Samples]:
    """Each commit's value (the median of its samples) and its raw samples."""
    levels = (100 * (1 + step) if i >= AT else 100.0 for i in range(commits))
    samples = [[level * math.exp(draw.gauss(0, noise)) for _ in range(PER_COMMIT)] for level in levels]
    return [statistics.median(commit) for commit in samples], samples


def otava_points(values: list[float], _: Samples) -> list[int]:
    found, _ = otava.compute_change_points(values, window_len=30, max_pvalue=0.001)
    return [point.index for point in found]


def boundaries(steps: list[tuple[int, int, float, float, float]]) -> list[int]:
    return [right for (_, right, *_), _ in zip(steps, steps[1:])]


def asv_points(values: list[float], _: Samples) -> list[int]:
    return boundaries(asv_steps.detect_steps(values))


def asv_weighted_points(values: list[float], samples: Samples) -> list[int]:
    weights = [get_weight(compute_stats(commit, 1)[1]) for commit in samples]
    return boundaries(asv_steps.detect_steps(values, weights))


def ruptures_points(_: list[float], samples: Samples) -> list[int]:
    return candidates(samples)


DETECTORS: dict[str, Detector] = {
    "Otava": otava_points,
    "asv": asv_points,
    "asv w": asv_weighted_points,
    "ruptures": ruptures_points,
}


def row(method: Detector, step: float, noise: float, trials: int, seed: int) -> str:
    draw = random.Random(seed)
    hits = others = 0
    seconds = 0.0
    for _ in range(trials):
        values, samples = series(step, noise, draw)
        started = time.perf_counter()
        points = method(values, samples)
        seconds += time.perf_counter() - started
        near = [p for p in points if abs(p - AT) <= 1] if step else []
        hits += bool(near)
        others += len(points) - min(len(near), 1)
    return f"{hits / trials:>5.2f} {others / trials:>5.2f} {seconds / trials * 1e3:>6.1f}"


def time_long(commits: int, seed: int) -> None:
    values, samples = series(0.0, 0.05, random.Random(seed), commits)
    for name, method in DETECTORS.items():
        started = time.perf_counter()
        points = method(values, samples)
        took = time.perf_counter() - started
        print(f"{name:>8}: {took:8.2f} s, {len(points)} change points on {commits} step-free commits")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--long", type=int, default=0, help="also time each detector on one series this long")
    args = parser.parse_args()
    header = " | ".join(f"{f'{name} det':>{max(9, len(name) + 4)}} {'fp':>5} {'ms':>6}" for name in DETECTORS)
    print(f"{'step':>5} {'noise':>5} | {header}")
    for noise in NOISES:
        for step in STEPS:
            cells = " | ".join(
                f"{row(method, step, noise, args.trials, args.seed):>{max(9, len(name) + 4) + 13}}"
                for name, method in DETECTORS.items()
            )
            print(f"{step:>5.0%} {noise:>5.0%} | {cells}")
    if args.long:
        time_long(args.long, args.seed)


if __name__ == "__main__":
    main()
