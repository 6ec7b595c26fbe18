"""A metric probe's history along ``regtrack scan``: steps found by PELT and confirmed by the rank
test, either way, with their change and interval; the noise of each series; none in pure noise;
the demo history's planted slowdown found as a step."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest
from cli_in import regtrack
from demo_histories import DemoHistories
from gitrepo import GitRepo
from hypothesis import given, settings
from hypothesis import strategies as st
from test_metric_bisect import history, noise_repo

from tracker.perf.changepoints import candidates, noise


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GitRepo:
    return noise_repo(tmp_path, monkeypatch)


def scan(repo: Path, *args: str) -> dict[str, Any]:
    result = regtrack("scan", *args, "--json", cwd=repo)
    assert result.exit_code == 0, result.output
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def test_a_step_and_its_way_back_are_found_with_their_change(repo: GitRepo) -> None:
    shas = history(repo, [100] * 6 + [130] * 6 + [100] * 6)
    report = scan(repo.path)
    found = [(c["sha"], c["previous"], c["way"]) for c in report["change_points"]]
    assert found == [(shas[6], shas[5], "slower"), (shas[12], shas[11], "faster")], report["change_points"]
    slower, faster = report["change_points"]
    assert 0.2 < slower["change"] < 0.4 and slower["low"] > 0.05
    assert -0.35 < faster["change"] < -0.15 and faster["high"] < -0.05
    [series] = report["noise"]
    assert (series["metric"], series["points"]) == ("spin_us", 18)
    assert 0 < series["noise"] < 0.1


def test_pure_noise_has_no_step(repo: GitRepo) -> None:
    history(repo, [100] * 14)
    report = scan(repo.path)
    assert report["change_points"] == []
    assert report["noise"][0]["points"] == 14


def test_a_change_within_the_threshold_is_no_step(repo: GitRepo) -> None:
    history(repo, [100] * 7 + [102] * 7)
    assert scan(repo.path)["change_points"] == []


def test_a_correctness_probe_has_no_metric_history(repo: GitRepo) -> None:
    (repo.path / "regtrack.toml").write_text('[targets.lib]\nrepo = "."\n[targets.lib.probes.ok]\ncommand = ["true"]\n')
    history(repo, [100, 130, 100])
    report = scan(repo.path)
    assert (report["change_points"], report["noise"]) == ([], [])


def test_a_clear_step_is_a_candidate_and_a_flat_series_has_none() -> None:
    draw = random.Random(3)
    points = [[(100 if i < 10 else 125) * math.exp(draw.gauss(0, 0.01))] for i in range(20)]
    assert 10 in candidates(points)
    assert candidates([[100.0]] * 12) == []
    assert candidates([[100.0], [130.0]]) == []


@settings(max_examples=40, deadline=None)
@given(st.floats(0.01, 0.2), st.integers(0, 2**31))
def test_the_noise_of_a_series_is_about_its_spread(sigma: float, seed: int) -> None:
    draw = random.Random(seed)
    points = [[100 * math.exp(draw.gauss(0, sigma))] for _ in range(200)]
    assert 0.6 * sigma < noise(points) < 1.6 * sigma


@pytest.mark.slow
def test_the_demo_historys_planted_slowdown_is_a_step_of_a_scan(
    demo_histories: DemoHistories, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    path, manifest = demo_histories.shared(60)
    assert manifest.slowdown is not None
    report = scan(path, "--probe", manifest.slowdown.probe)
    steps = {(c["sha"], c["way"]) for c in report["change_points"]}  # any metric: it slows both replays
    assert (manifest.slowdown.commit, "slower") in steps, (report["change_points"], report["noise"])
