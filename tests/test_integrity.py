"""Verdicts that mean what they say: reuse keys, resumed bisects, concurrent writers, worker
faults, out of memory, bad options and damaged databases, through the real CLI and real workers."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from gitrepo import GitRepo

from tracker.execution.client import WorkerClient
from tracker.execution.executors import LocalExecutor
from tracker.execution.protocol import Job
from tracker.measure import Prober
from tracker.targets.reuse import settings_key
from tracker.workspace import Workspace

TESTS = Path(__file__).resolve().parent
PROJECT_ROOT = TESTS.parent
PROBE_ENV = {
    "REGTRACK_PROBE_MODULES": "integrity_probes",
    "PYTHONPATH": os.pathsep.join([str(TESTS), str(PROJECT_ROOT)]),
}
COMMITS, BAD_FROM = 40, 25


def build_history(path: Path, commits: int = COMMITS, bad_from: int = BAD_FROM) -> list[str]:
    """``commits`` commits, each changing backend/; the bug is in from commit ``bad_from`` on."""
    repo = GitRepo(path)
    shas = []
    for step in range(commits):
        text = f"STEP = {step}\nBAD = {step >= bad_from}\n"
        shas.append(repo.commit(f"step {step}", {"backend/__init__.py": text}))
    return shas


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    path = tmp_path_factory.mktemp("integrity") / "repo"
    return path, build_history(path)


def regtrack(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    inherited = {name: value for name, value in os.environ.items() if name != "REGTRACK_DB_URL"}
    full_env = {**inherited, **PROBE_ENV, "REGTRACK_HOME": str(home), **env}
    return subprocess.run(
        [sys.executable, "-m", "tracker.cli", *args], env=full_env, capture_output=True, text=True, timeout=300
    )


def database(home: Path) -> sqlite3.Connection:
    return sqlite3.connect(home / "data" / "regtrack.db")


def one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("regtrack: error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def run_json(home: Path, repo: Path, *args: str) -> list[dict]:
    result = regtrack(home, "run", "--repo", str(repo), *args, "--json")
    assert result.returncode in (0, 1, 3), result.stderr  # 3: no probe could judge it
    return json.loads(result.stdout)["rows"]


# -- reuse keys -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_every_option_that_can_change_a_result_is_part_of_the_reuse_key(
    history: tuple[Path, list[str]], tmp_path: Path
) -> None:
    repo, shas = history
    home = tmp_path / "home"
    steady = ("--probe", "integrity_steady", shas[3])

    def reused(*options: str) -> bool:
        (row,) = run_json(home, repo, *steady, *options)
        return row["reused"]

    assert not reused() and reused()
    assert not reused("--dtype", "bfloat16"), "a float32 result answered for bfloat16"
    assert reused("--dtype", "bfloat16") and reused("--dtype", "float32")
    assert not reused("--seed", "5"), "a result at fresh seeds answered for a fixed seed"
    assert reused("--seed", "5") and not reused("--seed", "6")
    assert reused(), "the fresh-seed result is still the one for fresh seeds"


def test_a_case_with_other_parameters_is_run_afresh(
    history: tuple[Path, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, shas = history
    for name, value in {**PROBE_ENV, "REGTRACK_HOME": str(tmp_path / "home")}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.syspath_prepend(str(TESTS))
    workspace = Workspace.open(repo)
    probe = workspace.probe("integrity_steady")
    changed = replace(probe, cases=(replace(probe.cases[0], params={"scale": 99}), *probe.cases[1:]))
    try:
        with LocalExecutor(env=PROBE_ENV) as executor:
            tree = Prober.open(workspace, probe, executor, "run").record_commits([shas[2]])[shas[2]]
            assert not Prober.open(workspace, probe, executor, "run").measure(shas[2], tree).reused
            assert Prober.open(workspace, probe, executor, "run").measure(shas[2], tree).reused
            fresh = Prober.open(workspace, changed, executor, "run").measure(shas[2], tree)
            assert not fresh.reused, "a result for scale=0 answered for scale=99"
            bumped = Prober.open(workspace, replace(probe, version=2), executor, "run").measure(shas[2], tree)
            assert not bumped.reused, "a result of probe version 1 answered for version 2"
    finally:
        workspace.close()


def test_gc_removes_idle_snapshots_only(history: tuple[Path, list[str]], tmp_path: Path) -> None:
    repo, shas = history
    home = tmp_path / "home"
    run_json(home, repo, "--probe", "integrity_steady", shas[1])
    gc = regtrack(home, "gc", "--max-size", "0", "--json")
    assert gc.returncode == 0 and json.loads(gc.stdout)["kept_snapshots"] == 1, "a snapshot just used was removed"
    snapshots = home / "cache" / "snapshots"
    two_hours_ago = time.time() - 7200
    for entry in snapshots.iterdir():
        if not entry.name.startswith("."):
            os.utime(entry, (two_hours_ago, two_hours_ago))
    report = json.loads(regtrack(home, "gc", "--max-size", "0", "--json").stdout)
    assert (report["removed_snapshots"], report["kept_snapshots"]) == (1, 0)
    assert not [e for e in snapshots.iterdir() if not e.name.startswith(".")]


def test_settings_keys_differ_in_every_part() -> None:
    base = settings_key("float32", None, {"scale": 1})
    assert settings_key("float32", None, {"scale": 1}) == base
    for other in (
        settings_key("bfloat16", None, {"scale": 1}),
        settings_key("float32", 0, {"scale": 1}),
        settings_key("float32", None, {"scale": 2}),
        settings_key("float32", None, {"scale": 1, "extra": 0}),
    ):
        assert other != base
    assert settings_key("float32", 0, {}) != settings_key("float32", 1, {})


# -- resumed bisects ------------------------------------------------------------------------------

BISECT = ("bisect", "--probe", "integrity_flaky", "--strategy", "bayes", "--max-runs", "20", "--seed", "6", "--json")


def answer(report: dict) -> tuple[object, ...]:
    return (
        report["culprit"],
        report["no_culprit"],
        round(report["confidence"], 9),
        report["executions"],
        [(s["sha"], s["verdict"]) for s in report["steps"]],
    )


@pytest.fixture(scope="module")
def uninterrupted(history: tuple[Path, list[str]], tmp_path_factory: pytest.TempPathFactory) -> dict:
    repo, shas = history
    result = regtrack(
        tmp_path_factory.mktemp("home"), *BISECT, "--repo", str(repo), "--good", shas[0], "--bad", shas[-1]
    )
    assert result.returncode in (0, 1), result.stderr
    report = json.loads(result.stdout)
    assert report["executions"] > 16, "the kill points must fall inside the search"
    return report


@pytest.mark.parametrize("kill_at", [4, 12, 16])
def test_a_killed_bisect_resumes_as_the_same_search(
    history: tuple[Path, list[str]], uninterrupted: dict, tmp_path: Path, kill_at: int
) -> None:
    repo, shas = history
    home = tmp_path / "home"
    args = (*BISECT, "--repo", str(repo))
    counter = str(tmp_path / "executions")
    killed = regtrack(
        home, *args, "--good", shas[0], "--bad", shas[-1], INTEGRITY_COUNTER=counter, INTEGRITY_KILL_AT=str(kill_at)
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    resumed = regtrack(home, "bisect", "--probe", "integrity_flaky", "--repo", str(repo), "--resume", "--json")
    assert resumed.returncode in (0, 1), resumed.stderr
    assert answer(json.loads(resumed.stdout)) == answer(uninterrupted)
    assert resumed.returncode == (1 if uninterrupted["culprit"] else 0)


def test_resume_refuses_options_of_its_own(history: tuple[Path, list[str]], tmp_path: Path) -> None:
    repo, _ = history
    result = regtrack(
        tmp_path, "bisect", "--repo", str(repo), "--probe", "integrity_flaky", "--resume", "--max-runs", "30"
    )
    one_line_error(result, "drop --max-runs")


@pytest.mark.slow
def test_only_one_process_drives_a_session(
    history: tuple[Path, list[str]], uninterrupted: dict, tmp_path: Path
) -> None:
    repo, shas = history
    home = tmp_path / "home"
    killed = regtrack(
        home,
        *BISECT,
        "--repo",
        str(repo),
        "--good",
        shas[0],
        "--bad",
        shas[-1],
        INTEGRITY_COUNTER=str(tmp_path / "count"),
        INTEGRITY_KILL_AT="3",
    )
    assert killed.returncode == -signal.SIGKILL
    resume = [
        sys.executable,
        "-m",
        "tracker.cli",
        "bisect",
        "--probe",
        "integrity_flaky",
        "--repo",
        str(repo),
        "--resume",
        "--json",
    ]
    env = {**os.environ, **PROBE_ENV, "REGTRACK_HOME": str(home), "INTEGRITY_SLOW_S": "1"}
    first = subprocess.Popen(resume, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not _driver_is(home, first.pid):
            assert time.monotonic() < deadline and first.poll() is None, "the first resume never took the session"
            time.sleep(0.1)
        second = regtrack(home, "bisect", "--probe", "integrity_flaky", "--repo", str(repo), "--resume")
        one_line_error(second, "being driven by another process")
        out, err = first.communicate(timeout=300)
    finally:
        first.kill()
    assert answer(json.loads(out)) == answer(uninterrupted), err


def _driver_is(home: Path, pid: int) -> bool:
    try:
        with database(home) as connection:
            drivers = [row[0] for row in connection.execute("SELECT driver FROM bisect_sessions")]
    except sqlite3.Error:
        return False
    return any(d and d.split(":")[-2] == str(pid) for d in drivers)


# -- concurrency and interruptions --------------------------------------------------------------


@pytest.mark.slow
def test_concurrent_runs_store_one_execution_per_planned_case(history: tuple[Path, list[str]], tmp_path: Path) -> None:
    repo, shas = history
    home = tmp_path / "home"
    command = [
        sys.executable,
        "-m",
        "tracker.cli",
        "run",
        "--repo",
        str(repo),
        "--probe",
        "integrity_steady",
        shas[5],
        "--json",
    ]
    env = {**os.environ, **PROBE_ENV, "REGTRACK_HOME": str(home), "INTEGRITY_SLOW_S": "0.5"}
    assert regtrack(home, "db", "upgrade").returncode == 0
    processes = [
        subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(8)
    ]
    outputs = [p.communicate(timeout=300) for p in processes]
    assert all(p.returncode == 0 for p in processes), outputs
    with database(home) as connection:
        rows = connection.execute("SELECT case_id, attempt FROM runs").fetchall()
        claims = connection.execute("SELECT count(*) FROM claims").fetchone()[0]
    assert sorted(rows) == [(f"c{i}", 1) for i in range(4)], rows
    assert claims == 0
    assert sum(not json.loads(out)["rows"][0]["reused"] for out, _ in outputs) >= 1


def test_a_killed_run_keeps_its_finished_cases_and_the_next_completes_the_attempt(
    history: tuple[Path, list[str]], tmp_path: Path
) -> None:
    repo, shas = history
    home = tmp_path / "home"
    args = ("run", "--repo", str(repo), "--probe", "integrity_steady", shas[6], "--json")
    killed = regtrack(home, *args, INTEGRITY_COUNTER=str(tmp_path / "count"), INTEGRITY_KILL_AT="3")
    assert killed.returncode == -signal.SIGKILL
    with database(home) as connection:
        assert sorted(connection.execute("SELECT case_id, attempt FROM runs")) == [("c0", 1), ("c1", 1)]
    (row,) = json.loads(regtrack(home, *args).stdout)["rows"]
    assert row["verdict"] == "good"
    with database(home) as connection:
        assert sorted(connection.execute("SELECT case_id, attempt FROM runs")) == [(f"c{i}", 1) for i in range(4)]
        assert connection.execute("SELECT count(*) FROM claims").fetchone()[0] == 0


def test_a_case_that_edits_its_snapshot_does_not_poison_the_next(
    history: tuple[Path, list[str]], tmp_path: Path
) -> None:
    repo, shas = history
    home = tmp_path / "home"
    (row,) = run_json(home, repo, "--probe", "integrity_tamper", shas[2])
    assert row["verdict"] == "good", row
    with database(home) as connection:
        assert sorted(connection.execute("SELECT case_id, outcome FROM runs")) == [
            ("check", "pass"),
            ("tamper", "pass"),
        ]


# -- worker faults and out of memory -------------------------------------------------------------


def test_out_of_memory_is_untestable_in_both_forms(history: tuple[Path, list[str]], tmp_path: Path) -> None:
    repo, shas = history
    (row,) = run_json(tmp_path / "home", repo, "--probe", "integrity_oom", shas[1])
    assert row["verdict"] == "skip", row
    with database(tmp_path / "home") as connection:
        found = dict(connection.execute("SELECT case_id, outcome || ' ' || signature FROM runs"))
    assert found["memoryerror"] == "error out of memory: MemoryError"
    assert found["sigkill"] == "error worker killed by SIGKILL, out of memory?"


@pytest.fixture
def client(tmp_path: Path) -> WorkerClient:
    with WorkerClient(tmp_path / "worker.log", PROBE_ENV) as worker:
        yield worker


def snapshot(history: tuple[Path, list[str]], tmp_path: Path) -> Path:
    root = tmp_path / "snapshot"
    (root / "backend").mkdir(parents=True)
    (root / "backend" / "__init__.py").write_text("STEP = 0\nBAD = False\n")
    return root


def test_a_worker_that_dies_while_its_child_holds_the_pipe_is_a_crash_at_once(
    history: tuple[Path, list[str]], client: WorkerClient, tmp_path: Path
) -> None:
    result = client.run(
        Job("integrity_fork_crash", "only", str(snapshot(history, tmp_path)), "cpu", "float32", 0), timeout_s=120
    )
    assert result.outcome.value == "crash" and "code 3" in (result.signature or ""), "reported only after the timeout"


def test_stray_lines_on_the_protocol_pipe_are_ignored(
    history: tuple[Path, list[str]], client: WorkerClient, tmp_path: Path
) -> None:
    result = client.run(
        Job("integrity_stray", "only", str(snapshot(history, tmp_path)), "cpu", "float32", 0), timeout_s=60
    )
    assert result.outcome.value == "pass"
    assert "ignored stray output" in client.log_path.read_text()


# -- bad options ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        (("--device", "bogus"), "is not a device"),
        (("--dtype", "bogus"), "--dtype"),
        pytest.param(
            ("--device", "cuda"),
            "no CUDA device",
            marks=pytest.mark.skipif(torch.cuda.is_available(), reason="has a GPU"),
        ),
    ],
)
def test_bad_devices_and_dtypes_are_refused_before_anything_runs(
    history: tuple[Path, list[str]], tmp_path: Path, options: tuple[str, ...], needle: str
) -> None:
    repo, shas = history
    home = tmp_path / "home"
    result = regtrack(home, "run", "--repo", str(repo), "--probe", "integrity_steady", *options, shas[1])
    assert result.returncode == 2, result.stderr
    assert needle in result.stderr and "Traceback" not in result.stderr
    runs = (home / "data" / "regtrack.db").exists() and database(home).execute("SELECT count(*) FROM runs").fetchone()[
        0
    ]
    assert not runs


# -- damaged and foreign databases ---------------------------------------------------------------


def test_a_file_that_is_not_a_database_is_one_line_and_exit_2(history: tuple[Path, list[str]], tmp_path: Path) -> None:
    repo, _ = history
    home = tmp_path / "home"
    (home / "data").mkdir(parents=True)
    (home / "data" / "regtrack.db").write_bytes(os.urandom(8192))
    one_line_error(regtrack(home, "history", "--repo", str(repo)), "regtrack.db")


def test_a_damaged_database_is_one_line_and_exit_2(history: tuple[Path, list[str]], tmp_path: Path) -> None:
    repo, shas = history
    home = tmp_path / "home"
    run_json(home, repo, "--probe", "integrity_steady", shas[1])
    file = home / "data" / "regtrack.db"
    with database(home) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(file.read_bytes())
    page = 4096
    for start in range(page, len(data), page):
        data[start : start + 64] = os.urandom(64)
    file.write_bytes(bytes(data))
    one_line_error(regtrack(home, "history", "--repo", str(repo)), "regtrack.db")


def test_a_foreign_sqlite_file_is_refused_untouched(history: tuple[Path, list[str]], tmp_path: Path) -> None:
    repo, _ = history
    foreign = tmp_path / "app.db"
    with sqlite3.connect(foreign) as connection:
        connection.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    before = foreign.read_bytes()
    result = regtrack(tmp_path, "history", "--repo", str(repo), REGTRACK_DB_URL=f"sqlite:///{foreign}")
    one_line_error(result, "not a regtrack database", "users")
    assert foreign.read_bytes() == before
    with sqlite3.connect(foreign) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
