"""Candidate steps along a metric's history, from ruptures' PELT, and the series' noise.

The series is one point per measured revision (the median of its executions' values), on a log
scale so a step is a ratio. ruptures' PELT with the L2 (mean-shift) cost proposes change points
under a penalty fixed before looking for a step, ``2 ln(n) sigma^2`` (BIC for a mean shift, two
parameters a change), ``sigma`` the noise read from the series' first differences (their MAD /
sqrt 2, which a step moves only once). ``scripts/changepoint_compare.py`` chose it over Apache
Otava's E-divisive and asv's ``step_detect`` on the same series: it finds 5-10 % steps as often as
Otava (0.78 / 0.97 of series at 5 % noise, Otava the same; asv 0.05 / 0.88), is as fast (0.22 s
on 7,000 commits), and needs only numpy and scipy, where Otava pins numpy 2.2 and scipy below what
regtrack installs, and brings BigQuery and Slack clients. Its cost is false candidates (0.25-0.35
a 60-point series without a step, with segments of one point allowed so that a slowdown fixed at
the next revision is seen): a candidate is only that until the rank test confirms it
(``tracker.metric_history``). A one-point segment standing two sigmas off both neighbours is a
candidate too: PELT's penalty hides a slowdown fixed at the next measured revision (the demo's
planted one, on a loaded machine).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import median

MIN_POINTS = 4
"""Fewer measured revisions than this hold no segment of two on each side of a step."""
MAD_TO_SIGMA = 1.4826
SPIKE_SIGMAS = 2.0
"""A one-point segment this many sigmas above or below both neighbours is a candidate too."""


def noise(points: Sequence[Sequence[float]]) -> float:
    """The series' noise as a fraction: sigma of its log-scale points, from first differences."""
    series = _series(points)
    return math.expm1(_sigma(series)) if len(series) >= 3 else math.nan


def candidates(points: Sequence[Sequence[float]]) -> list[int]:
    """PELT's change points of a series whose point ``i`` holds its executions' values: the index
    of the first point after each step."""
    if len(points) < MIN_POINTS or any(not values for values in points):
        return []
    # imported here, as scipy.stats is in tracker.perf.rank: only a metric's history needs them
    import numpy as np
    import ruptures

    series = _series(points)
    sigma = _sigma(series)
    penalty = 2 * math.log(len(series)) * max(sigma**2, 1e-12)
    signal = np.asarray(series, dtype=float).reshape(-1, 1)
    found = ruptures.KernelCPD(kernel="linear", min_size=1).fit(signal).predict(pen=penalty)
    return sorted({int(point) for point in found[:-1]} | set(_spikes(series, SPIKE_SIGMAS * sigma)))


def _spikes(series: list[float], height: float) -> list[int]:
    """Both edges of every one-point segment standing ``height`` above or below both neighbours:
    a slowdown fixed at the next measured revision, which PELT's penalty for two change points
    hides unless it is tall."""
    found = []
    for i in range(1, len(series) - 1):
        rise, fall = series[i] - series[i - 1], series[i] - series[i + 1]
        if min(rise, fall) > height or max(rise, fall) < -height:
            found += [i, i + 1]
    return found


def _series(points: Sequence[Sequence[float]]) -> list[float]:
    return [math.log(median(values)) for values in points]


def _sigma(series: list[float]) -> float:
    """The noise of a log-scale series from its first differences, robust to a few steps."""
    differences = [b - a for a, b in zip(series, series[1:])]
    centre = median(differences)
    return MAD_TO_SIGMA * median(abs(d - centre) for d in differences) / math.sqrt(2)
