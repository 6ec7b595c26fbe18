"""Stored runs along the first-parent line as metric series: what the report plots.

Pure: the line, each commit's target tree and the stored runs in, ``Series`` out. A run's result
belongs to its tree, so every commit of the line whose tree has a run gets a point; the point is
``measured`` only at the commit the run itself executed at (a run copied there from another tree
by read reuse was measured elsewhere, so it counts as reused too).

A probe stores the limit a metric was judged against as a metric named ``<metric>_tol``
(``rel_err_tol`` for ``rel_err``): it becomes that series' ``tolerance``, never a series itself.
Only finite numbers make points: a NaN or an infinity has no place on a (log-scaled) axis, and a
probe that produced one says so in its verdict and signature, which the report shows per cell.
Booleans are not measurements and make no series either.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from tracker.core.measurements import DURATION, TOLERANCE_SUFFIX
from tracker.core.records import EnvironmentInfo, RunRow
from tracker.core.verdicts import Outcome
from tracker.report.model import Series, SeriesPoint


@dataclass(frozen=True)
class SeriesKey:
    """What one set of series shares: a probe's case in one environment at one dtype."""

    probe: str
    case: str
    fingerprint: str
    dtype: str | None


@dataclass(frozen=True)
class LinePoint:
    """The run that stands for commit ``sha`` of the line under a series key."""

    index: int
    sha: str
    run: RunRow
    measured: bool


def line_series(
    line: Sequence[str],
    trees: Mapping[str, str],
    runs: Iterable[RunRow],
    devices: Mapping[str, str],
    copies: Collection[int] = frozenset(),
) -> tuple[Series, ...]:
    """Every numeric metric and the duration of every probe case along ``line`` (oldest first),
    one series per environment fingerprint and dtype; ``trees`` maps each commit to its target
    tree, ``devices`` each fingerprint to what a reader calls it (``cpu``, a GPU's name), and
    ``copies`` holds the ids of runs copied from another tree. Skipped runs measured nothing and
    make no points. Where a tree has several runs of one case (attempts, re-runs), the newest
    run's value stands for it, by start time."""
    positions: dict[str, list[int]] = defaultdict(list)
    for index, sha in enumerate(line):
        positions[trees[sha]].append(index)
    found: list[Series] = []
    for key, by_tree in _newest_by_tree(runs).items():
        points = _line_points(line, positions, by_tree, copies)
        if points:
            found.extend(_series_of(key, devices.get(key.fingerprint, key.fingerprint), points, copies))
    return tuple(sorted(found, key=_order))


def device_label(environment: EnvironmentInfo) -> str:
    """What a reader calls an environment: its GPU's name, else its device (``cpu``)."""
    return environment.gpu_name or environment.device


def _newest_by_tree(runs: Iterable[RunRow]) -> dict[SeriesKey, dict[str, RunRow]]:
    newest: dict[SeriesKey, dict[str, RunRow]] = defaultdict(dict)
    for run in runs:
        if run.outcome is Outcome.SKIP:
            continue
        by_tree = newest[SeriesKey(run.probe_name, run.case_id, run.fingerprint, run.dtype)]
        held = by_tree.get(run.tree_hash)
        if held is None or (run.started_at, run.id) > (held.started_at, held.id):
            by_tree[run.tree_hash] = run
    return newest


def _line_points(
    line: Sequence[str], positions: Mapping[str, list[int]], by_tree: Mapping[str, RunRow], copies: Collection[int]
) -> list[LinePoint]:
    points = [
        LinePoint(index, line[index], run, measured=line[index] == run.sha and run.id not in copies)
        for tree, run in by_tree.items()
        for index in positions.get(tree, ())
    ]
    return sorted(points, key=lambda point: point.index)


def _series_of(key: SeriesKey, device: str, points: Sequence[LinePoint], copies: Collection[int]) -> list[Series]:
    """One series per metric that any point stored as a finite number, and one of the durations;
    each run's value is read once, however many commits share its tree. A copied run took no time
    of its own (its stored duration is 0), so it makes no duration point."""
    runs = list({point.run.id: point.run for point in points}.values())
    names = dict.fromkeys(name for run in runs for name in run.metrics if _is_measurement(name))
    series = [_one_series(key, device, name, points, {run.id: _metric(run, name) for run in runs}) for name in names]
    durations = {run.id: None if run.id in copies else run.duration_s for run in runs}
    series.append(_one_series(key, device, DURATION, points, durations))
    return [s for s in series if s.points]


def _one_series(
    key: SeriesKey, device: str, name: str, points: Sequence[LinePoint], values: Mapping[int, float | None]
) -> Series:
    """``values`` maps the id of each run behind ``points`` to its value of ``name``."""
    finite = {run_id: value for run_id, value in values.items() if value is not None and math.isfinite(value)}
    kept = [point for point in points if point.run.id in finite]
    return Series(
        probe=key.probe,
        case=key.case,
        metric=name,
        environment=key.fingerprint,
        device=device,
        dtype=key.dtype,
        tolerance=_tolerance(name, kept),
        points=tuple(SeriesPoint(point.sha, finite[point.run.id], point.measured) for point in kept),
    )


def _tolerance(name: str, points: Sequence[LinePoint]) -> float | None:
    """The limit stored for ``name`` by the run behind the line's newest point that has one (a
    probe's limit may change along history; the plot draws the one that holds at the line's end)."""
    for point in reversed(points):
        limit = _metric(point.run, name + TOLERANCE_SUFFIX)
        if limit is not None and math.isfinite(limit):
            return limit
    return None


def _metric(run: RunRow, name: str) -> float | None:
    value = run.metrics.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _is_measurement(name: str) -> bool:
    return not name.endswith(TOLERANCE_SUFFIX) and name != DURATION


def _order(series: Series) -> tuple[str, str, bool, str, str, str, str]:
    """Probe, case, the stored metrics before the duration, then environment and dtype."""
    return (
        series.probe,
        series.case,
        series.metric == DURATION,
        series.metric,
        series.device,
        series.environment,
        series.dtype or "",
    )
