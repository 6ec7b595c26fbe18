"""The report's metric series: runs stored in a real SQLite store for the commits of a real git
repository, read back by ``build_report`` as one series per probe case, metric, environment and
dtype along the first-parent line, each point measured there or reused from the same tree."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from stored_runs import CPU, H200, PROBE, Stored, stored_repository

from tracker.core.verdicts import Outcome
from tracker.report.model import ReportData, Series


@pytest.fixture
def stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stored]:
    with stored_repository(tmp_path, monkeypatch) as found:
        yield found


def by_metric(data: ReportData, metric: str) -> list[Series]:
    return [s for s in data.series if s.metric == metric]


def points(series: Series, line: list[str]) -> list[tuple[int, float, bool]]:
    return [(line.index(p.sha), p.value, p.measured) for p in series.points]


def test_every_commit_of_a_measured_tree_has_a_point_measured_only_where_it_ran(stored: Stored) -> None:
    stored.add(0, {"rel_err": 1e-6})
    stored.add(1, {"rel_err": 2e-3})
    stored.add(4, {"rel_err": 3e-7})
    [series] = by_metric(stored.report(), "rel_err")
    assert (series.probe, series.case, series.environment, series.device, series.dtype) == (
        PROBE,
        "bs4_T2_N4",
        CPU.fingerprint,
        "cpu",
        "float32",
    )
    # c2 shares c1's tree, c3 c4's, c5 c0's: their values were measured at those commits.
    assert points(series, stored.line) == [
        (0, 1e-6, True),
        (1, 2e-3, True),
        (2, 2e-3, False),
        (3, 3e-7, False),
        (4, 3e-7, True),
        (5, 1e-6, False),
    ]


def test_values_are_the_stored_ones_and_the_newest_attempt_stands_for_a_tree(stored: Stored) -> None:
    stored.add(1, {"rel_err": 0.5, "max_abs_err": 0.25}, outcome=Outcome.FAIL, signature="off reference")
    stored.add(1, {"rel_err": 0.125, "max_abs_err": 0.0625}, attempt=2)
    stored.add(3, {"rel_err": 4e-6, "max_abs_err": 1e-5})
    data = stored.report()
    newest = {}
    for run in sorted(stored.stored_runs(), key=lambda r: r.started_at):
        newest[run.tree_hash] = run
    for series in data.series:
        for point in series.points:
            run = newest[stored.trees[point.sha]]
            wanted = run.duration_s if series.metric == "duration_s" else run.metrics[series.metric]
            assert point.value == wanted
    assert {s.metric for s in data.series} == {"rel_err", "max_abs_err", "duration_s"}
    [rel_err] = by_metric(data, "rel_err")
    assert points(rel_err, stored.line)[:2] == [(1, 0.125, True), (2, 0.125, False)]
    [duration] = by_metric(data, "duration_s")
    assert [p.value for p in duration.points] == [1.5, 1.5, 3.5, 3.5]
    assert data.series[-1].metric == "duration_s"  # the probe's own metrics come first


def test_one_series_per_environment_and_dtype(stored: Stored) -> None:
    stored.add(0, {"rel_err": 1e-6})
    stored.add(0, {"rel_err": 2e-3}, env="h200", dtype="bfloat16")
    stored.add(3, {"rel_err": 5e-3}, env="h200", dtype="bfloat16")
    stored.add(3, {"rel_err": 1e-4}, env="h200", dtype="float16", settings_key="settings-f16")
    found = {(s.device, s.environment, s.dtype): points(s, stored.line) for s in by_metric(stored.report(), "rel_err")}
    assert found == {
        ("cpu", CPU.fingerprint, "float32"): [(0, 1e-6, True), (5, 1e-6, False)],
        ("NVIDIA H200", H200.fingerprint, "bfloat16"): [
            (0, 2e-3, True),
            (3, 5e-3, True),
            (4, 5e-3, False),
            (5, 2e-3, False),
        ],
        ("NVIDIA H200", H200.fingerprint, "float16"): [(3, 1e-4, True), (4, 1e-4, False)],
    }


def test_runs_stored_without_a_dtype_are_a_series_of_their_own(stored: Stored) -> None:
    stored.add(0, {"rel_err": 1e-6}, dtype=None, settings_key="settings-old")
    stored.add(1, {"rel_err": 2e-6})
    assert sorted((s.dtype or "", len(s.points)) for s in by_metric(stored.report(), "rel_err")) == [
        ("", 2),
        ("float32", 2),
    ]


def test_a_tol_metric_is_the_series_tolerance_not_a_series(stored: Stored) -> None:
    stored.add(1, {"rel_err": 1e-6, "rel_err_tol": 1e-3, "max_abs_err": 1e-5})
    stored.add(3, {"rel_err": 2e-6, "rel_err_tol": 1e-5, "max_abs_err": 1e-5})
    data = stored.report()
    # The limit that holds at the line's newest point (c4, c3's tree), where a probe changed it.
    assert {s.metric: s.tolerance for s in data.series} == {"rel_err": 1e-5, "max_abs_err": None, "duration_s": None}


def test_non_finite_and_non_numeric_metrics_make_no_points(stored: Stored) -> None:
    stored.add(0, {"rel_err": math.nan, "max_abs_err": 0.5, "label": "wide", "graph": True})
    stored.add(1, {"rel_err": math.inf, "max_abs_err": -math.inf})
    stored.add(3, {"rel_err": 0.25, "max_abs_err": 0.125, "replays": 3})
    data = stored.report()
    assert {s.metric: [stored.line.index(p.sha) for p in s.points] for s in data.series} == {
        "rel_err": [3, 4],
        "max_abs_err": [0, 3, 4, 5],
        "replays": [3, 4],
        "duration_s": [0, 1, 2, 3, 4, 5],
    }


def test_skipped_runs_make_no_points(stored: Stored) -> None:
    stored.add(0, {}, outcome=Outcome.SKIP, signature="needs a CUDA device")
    stored.add(1, {"rel_err": 0.5})
    stored.add(1, {}, outcome=Outcome.SKIP, attempt=2)
    data = stored.report()
    assert {s.metric: [stored.line.index(p.sha) for p in s.points] for s in data.series} == {
        "rel_err": [1, 2],
        "duration_s": [1, 2],
    }


def test_a_run_copied_by_read_reuse_is_not_measured_where_it_was_copied(stored: Stored) -> None:
    measured = stored.add(0, {"rel_err": 1e-6})
    stored.ws.store.copy_attempt(stored.repo_id, stored.line[3], stored.trees[stored.line[3]], [measured], None, "run")
    [series] = by_metric(stored.report(), "rel_err")
    assert points(series, stored.line) == [(0, 1e-6, True), (3, 1e-6, False), (4, 1e-6, False), (5, 1e-6, False)]


def test_a_copied_run_makes_no_duration_point_since_nothing_ran(stored: Stored) -> None:
    measured = stored.add(0, {"rel_err": 1e-6})
    stored.ws.store.copy_attempt(stored.repo_id, stored.line[3], stored.trees[stored.line[3]], [measured], None, "run")
    [series] = by_metric(stored.report(), "duration_s")
    assert [stored.line.index(p.sha) for p in series.points] == [0, 5]  # c5 has c0's tree; c3 and c4 the copy


def test_only_the_probes_shown_have_series(stored: Stored) -> None:
    stored.add(0, {"rel_err": 1e-6})
    stored.add(1, {"rel_err": 1e-6}, probe_id=stored.ws.store.probe_version("other", 1, "c0de"))
    assert {s.probe for s in stored.report().series} == {PROBE}
