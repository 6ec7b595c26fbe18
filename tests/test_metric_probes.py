"""Metric probes: each execution stores every sample of each declared metric (and its median among
the metrics), through the worker and the store; a probe that returns fewer samples than it declared
measured nothing (untestable); a run reused at another tree by what it read keeps its samples."""

from __future__ import annotations

import json
import sqlite3
import statistics
import subprocess
from pathlib import Path
from typing import Any

import pytest
from demo_histories import DemoHistories
from gitrepo import GitRepo
from test_targets import PROJECT_ROOT, mylib, mylib_repo, mylib_store, run_json, write_config

import tracker.execution.conditions as run_conditions
from probes import ProbeContext, get_probe, run_probe
from tracker.core.verdicts import Outcome
from tracker.execution.conditions import conditions
from tracker.perf.rank import Call, compare


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return mylib_store(tmp_path, monkeypatch)


@pytest.fixture
def repo(tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> GitRepo:
    return mylib_repo(tmp_path, monkeypatch)


def stored_samples(home: Path) -> list[tuple[str, str, dict[str, Any] | None]]:
    with sqlite3.connect(home / "data" / "regtrack.db") as db:
        rows = db.execute(
            "SELECT commits.sha, runs.outcome, runs.samples FROM runs JOIN commits ON runs.commit_id = commits.id "
            "ORDER BY runs.id"
        ).fetchall()
    return [(sha, outcome, json.loads(samples) if samples else None) for sha, outcome, samples in rows]


def test_every_sample_is_stored_with_the_median_among_the_metrics(repo: GitRepo, home: Path) -> None:
    write_config(repo, paths='["src"]', import_roots='["src"]')
    good = repo.commit("mylib", mylib(100))
    bad = repo.commit("break mylib", mylib(200, broken=True))

    rows = {row["sha"]: row for row in run_json(good, bad, "--probe", "mylib_latency")}
    assert [rows[sha]["verdict"] for sha in (good, bad)] == ["good", "bad"]
    assert rows[good]["metrics"]["spin_us"] == pytest.approx(103.0)
    spins = {sha: samples["spin_us"] for sha, _, samples in stored_samples(home) if samples}
    assert spins[good] == pytest.approx([100 * (1 + 0.01 * i) for i in range(7)])
    assert spins[bad] == pytest.approx([200 * (1 + 0.01 * i) for i in range(7)])


def test_a_probe_short_of_a_sample_measured_nothing(repo: GitRepo, home: Path) -> None:
    write_config(repo, paths='["src"]', import_roots='["src"]')
    good = repo.commit("mylib", mylib(100))
    [row] = run_json(good, "--probe", "mylib_short")
    assert row["verdict"] == "skip"
    assert row["signature"] == "metric probe error: spin_us has 6 positive finite samples, 7 declared"
    assert [(outcome, samples) for _, outcome, samples in stored_samples(home)] == [("error", None)]


def test_a_run_reused_where_the_probe_read_the_same_files_keeps_its_samples(repo: GitRepo, home: Path) -> None:
    write_config(repo, paths='["src", "docs"]', import_roots='["src"]')
    first = repo.commit("mylib", mylib(100))
    docs = repo.commit("docs only", {"docs/notes.md": "nothing the probe reads\n"})
    run_json(first, "--probe", "mylib_latency")
    [row] = run_json(docs, "--probe", "mylib_latency")
    assert row["reused"] is True
    stored = {sha: samples for sha, _, samples in stored_samples(home)}
    assert stored[docs] == stored[first] and len(stored[docs]["spin_us"]) == 7


TIMER = """\
import json, os, sys
value = float(open("src/mylib/__init__.py").read().split()[2])
repeat = int(os.environ["REGTRACK_REPEAT"]) - int(sys.argv[1])
samples = {"spin_us": [value * (1 + 0.01 * i) for i in range(repeat)]}
json.dump({"samples": samples}, open(os.environ["REGTRACK_METRICS"], "w"))
"""


def command_config(repo: GitRepo, repeat: int, direction: str = "lower", short: int = 0) -> None:
    (repo.path / "regtrack.toml").write_text(
        '[targets.lib]\nrepo = "."\npaths = ["src", "timer.py"]\n'
        "[targets.lib.probes.spin]\n"
        f'command = ["python", "timer.py", "{short}"]\n'
        f'metrics = [{{ name = "spin_us", unit = "us", direction = "{direction}" }}]\n'
        f"repeat = {repeat}\n"
    )


def test_a_command_takes_the_samples_it_is_told_to_and_each_part_of_its_declaration_keys_its_results(
    repo: GitRepo, home: Path
) -> None:
    sha = repo.commit("mylib", {**mylib(100), "timer.py": TIMER})
    command_config(repo, repeat=5)
    [first] = run_json(sha)
    assert (first["verdict"], first["reused"], first["metrics"]["spin_us"]) == ("good", False, pytest.approx(102.0))
    assert [len(samples["spin_us"]) for _, _, samples in stored_samples(home)] == [5]
    assert run_json(sha)[0]["reused"] is True

    command_config(repo, repeat=9)
    assert run_json(sha)[0]["reused"] is False
    command_config(repo, repeat=9, direction="higher")
    assert run_json(sha)[0]["reused"] is False
    assert [len(samples["spin_us"]) for _, _, samples in stored_samples(home)] == [5, 9, 9]


def test_a_command_short_of_a_sample_measured_nothing(repo: GitRepo, home: Path) -> None:
    sha = repo.commit("mylib", {**mylib(100), "timer.py": TIMER})
    command_config(repo, repeat=5, short=2)
    [row] = run_json(sha)
    assert (row["verdict"], row["signature"]) == (
        "skip",
        "metric probe error: spin_us has 3 positive finite samples, 5 declared",
    )


def test_the_demo_latency_probe_times_decode_and_target_verify_of_each_batch() -> None:
    """On the installed demo backend: every sample of both metrics, and the larger batch's fastest
    sample slower than the smaller one's."""
    probe = get_probe("demo_latency")
    results = {r.case.id: r.result for r in run_probe(probe, ProbeContext(root=PROJECT_ROOT))}
    for result in results.values():
        assert result.outcome is Outcome.PASS, result
        assert {name: len(values) for name, values in result.samples.items()} == {
            "decode_us": probe.repeat,
            "target_verify_us": probe.repeat,
        }
        assert result.metrics["decode_us"] == statistics.median(result.samples["decode_us"])
    small, large = results["bs4-p16"].samples, results["bs16-p64"].samples
    for metric in ("decode_us", "target_verify_us"):  # the fastest sample: what other load adds only slows
        assert min(large[metric]) > min(small[metric]), metric


def latency_at(repo: Path, sha: str, where: Path) -> dict[str, list[float]]:
    """``demo_latency``'s samples (case bs4-p16) at ``sha`` of the demo history, run in-process."""
    where.mkdir()
    archive = subprocess.run(["git", "-C", str(repo), "archive", sha], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive, check=True)
    [result] = run_probe(get_probe("demo_latency"), ProbeContext(root=where), ["bs4-p16"])
    assert result.result.outcome is Outcome.PASS, result
    return result.result.samples


@pytest.mark.slow
def test_the_demo_historys_planted_slowdown_is_slower_by_the_rank_test_and_its_fix_is_not(
    demo_histories: DemoHistories, tmp_path: Path
) -> None:
    repo, manifest = demo_histories.shared(60)
    assert manifest.slowdown is not None
    metric = manifest.slowdown.metric
    before = latency_at(repo, f"{manifest.slowdown.commit}~1", tmp_path / "before")[metric]
    slow = latency_at(repo, manifest.slowdown.commit, tmp_path / "slow")[metric]
    fixed = latency_at(repo, manifest.slowdown.fix, tmp_path / "fixed")[metric]
    planted = compare(before, slow, threshold=0.05)
    assert planted.call is Call.SLOWER and planted.effect.low > 0.2, planted
    assert compare(slow, fixed).call is Call.NOT_SLOWER
    assert compare(before, fixed, threshold=0.2).call is not Call.SLOWER


def test_a_metric_probes_runs_keep_the_conditions_they_ran_in_and_other_runs_none(repo: GitRepo, home: Path) -> None:
    sha = repo.commit("mylib", {**mylib(100), "timer.py": TIMER})
    command_config(repo, repeat=3)
    run_json(sha)
    with sqlite3.connect(home / "data" / "regtrack.db") as db:
        [stored] = db.execute("SELECT conditions FROM runs").fetchall()
    assert (json.loads(stored[0] or "null") or {}) == conditions("cpu")
    (repo.path / "regtrack.toml").write_text('[targets.lib]\nrepo = "."\n[targets.lib.probes.ok]\ncommand = ["true"]\n')
    run_json(sha)
    with sqlite3.connect(home / "data" / "regtrack.db") as db:
        [(other,)] = db.execute("SELECT conditions FROM runs ORDER BY id DESC LIMIT 1").fetchall()
    assert json.loads(other or "null") is None


def test_the_conditions_tell_the_cpu_governor_where_the_os_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    governor = tmp_path / "scaling_governor"
    governor.write_text("performance\n")
    monkeypatch.setattr(run_conditions, "GOVERNOR", governor)
    assert conditions("cpu") == {"cpu_governor": "performance"}
    monkeypatch.setattr(run_conditions, "GOVERNOR", tmp_path / "absent")
    assert conditions("cpu") == {}
