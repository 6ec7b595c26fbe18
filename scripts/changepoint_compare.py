"""Apache Otava's E-divisive change points against asv's step detection, on the same series.

    python3 -m venv /tmp/cp && /tmp/cp/bin/pip install apache-otava==0.8.0 asv==0.6.6
    /tmp/cp/bin/python scripts/changepoint_compare.py [--trials 40] [--seed 1]

Runs in a virtual environment of its own: Otava pins numpy and scipy below what regtrack installs.
Each series is 60 commits, each commit's value the median of 5 samples with log-normal noise of the
row's level, and one step of the row's size at commit 30 (none at 0 %). For each library: the share
of series whose change points include one within a commit of the step ("det"), the change points
per series anywhere else ("fp"), and milliseconds per series. Otava: ``compute_change_points``
with a window of 30 and p < 0.001 (its defaults but the window); asv: every boundary between the
steps of ``detect_steps``.
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

COMMITS, AT, PER_COMMIT = 60, 30, 5
STEPS = (0.0, 0.02, 0.05, 0.10, 0.20, 0.50)
NOISES = (0.01, 0.05, 0.10)


def series(step: float, noise: float, draw: random.Random) -> list[float]:
    levels = (100 * (1 + step) if i >= AT else 100.0 for i in range(COMMITS))
    return [statistics.median(level * math.exp(draw.gauss(0, noise)) for _ in range(PER_COMMIT)) for level in levels]


def otava_points(values: list[float]) -> list[int]:
    found, _ = otava.compute_change_points(values, window_len=30, max_pvalue=0.001)
    return [point.index for point in found]


def asv_points(values: list[float]) -> list[int]:
    steps = asv_steps.detect_steps(values)
    return [right for (_, right, *_), _ in zip(steps, steps[1:])]


def row(method: Callable[[list[float]], list[int]], step: float, noise: float, trials: int, seed: int) -> str:
    draw = random.Random(seed)
    hits = others = 0
    seconds = 0.0
    for _ in range(trials):
        values = series(step, noise, draw)
        started = time.perf_counter()
        points = method(values)
        seconds += time.perf_counter() - started
        near = [p for p in points if abs(p - AT) <= 1] if step else []
        hits += bool(near)
        others += len(points) - min(len(near), 1)
    return f"{hits / trials:>5.2f} {others / trials:>5.2f} {seconds / trials * 1e3:>6.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(f"{'step':>5} {'noise':>5} | {'Otava det':>9} {'fp':>5} {'ms':>6} | {'asv det':>7} {'fp':>5} {'ms':>6}")
    for noise in NOISES:
        for step in STEPS:
            otava_row = row(otava_points, step, noise, args.trials, args.seed)
            asv_row = row(asv_points, step, noise, args.trials, args.seed)
            print(f"{step:>5.0%} {noise:>5.0%} |     {otava_row} |   {asv_row}")


if __name__ == "__main__":
    main()
