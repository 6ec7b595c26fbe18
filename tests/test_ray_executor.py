"""The Ray executor on a local Ray cluster with four logical GPUs: one actor per slot, each with its
own CUDA_VISIBLE_DEVICES; k-ary bisection over it in ceil(log5 n) rounds; an actor killed mid-bisect
loses no step. Real Ray, real git, real SQLite, real workers under the actors."""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_in import regtrack
from demo_histories import DemoHistories
from gitrepo import GitRepo
from worker_probes import __file__ as worker_probes_file

from tracker.core.errors import UsageError
from tracker.core.verdicts import Outcome
from tracker.demo.history import DemoManifest
from tracker.execution.protocol import Job
from tracker.execution.ray_executor import ACTOR_DIED, RayExecutor

if os.environ.get("CI"):
    import ray  # CI installs the ray extra: a missing Ray must fail there, not skip
else:
    ray = pytest.importorskip("ray")

pytestmark = [pytest.mark.ray, pytest.mark.slow]

GPUS = 4
TEST_ENV = {"REGTRACK_PROBE_MODULES": "worker_probes", "PYTHONPATH": str(Path(worker_probes_file).resolve().parent)}


@pytest.fixture(scope="module", autouse=True)
def cluster() -> object:
    ray.init(num_cpus=GPUS, num_gpus=GPUS, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)
    return tmp_path / "home"


@pytest.fixture(scope="module")
def demo(demo_histories: DemoHistories) -> tuple[Path, DemoManifest]:
    return demo_histories.shared(150)


def executor(tmp_path: Path, workers: int = GPUS, **options: object) -> RayExecutor:
    return RayExecutor("cpu", "float32", workers, timeout_s=60, log_dir=tmp_path / "logs", env=TEST_ENV, **options)  # type: ignore[arg-type]


def job(probe: str, case_id: str, root: Path) -> Job:
    return Job(probe, case_id, str(root), "cpu", "float32", 0)


def test_each_actor_and_its_worker_see_their_own_gpu(tmp_path: Path) -> None:
    with executor(tmp_path, gpus_per_actor=1) as ray_executor:
        placements = ray_executor.placements()
        seen_by_actors = [p.cuda_visible_devices for p in placements]
        results = ray_executor.run_many([job("worker_test_where", "slow", tmp_path) for _ in range(GPUS)])
    assert sorted(seen_by_actors) == [str(gpu) for gpu in range(GPUS)]
    assert len({p.pid for p in placements}) == GPUS
    # four slow cases at once: each ran on its own actor, whose worker inherited the actor's GPU
    assert sorted(r.detail for r in results) == [str(gpu) for gpu in range(GPUS)]
    assert {r.outcome for r in results} == {Outcome.PASS}


def test_cpu_actors_ask_for_no_gpu(tmp_path: Path) -> None:
    with executor(tmp_path, workers=2) as ray_executor:
        assert ray_executor.gpus_per_actor == 0.0
        assert {p.cuda_visible_devices for p in ray_executor.placements()} <= {None, ""}


def test_an_actor_killed_mid_case_is_replaced_and_the_case_runs_again(tmp_path: Path) -> None:
    with executor(tmp_path, workers=2) as ray_executor:
        victim = ray_executor.placements()[0].pid
        killer = threading.Timer(1.5, os.kill, (victim, signal.SIGKILL))
        killer.start()
        results = ray_executor.run_many([job("worker_test_where", "slow", tmp_path) for _ in range(2)])
        killer.join()
        after = {p.pid for p in ray_executor.placements()}
    assert [r.outcome for r in results] == [Outcome.PASS, Outcome.PASS]
    assert victim not in after and len(after) == 2


def test_a_case_that_kills_every_actor_it_runs_on_is_a_crash(tmp_path: Path) -> None:
    with executor(tmp_path, workers=1) as ray_executor:
        [result] = ray_executor.run_many([job("worker_test_kill_host", "once", tmp_path)])
        still_serving = ray_executor.run_many([job("worker_test_where", "quick", tmp_path)])
    assert (result.outcome, result.signature) == (Outcome.CRASH, ACTOR_DIED)
    assert [r.outcome for r in still_serving] == [Outcome.PASS]


def bisect(repo: Path, good: str, bad: str, *options: str) -> dict:
    result = regtrack(
        "bisect",
        "--repo",
        str(repo),
        "--good",
        good,
        "--bad",
        bad,
        "--probe",
        "target_verify_metadata",
        "--executor",
        "ray",
        "--json",
        *options,
        cwd=repo,
    )
    assert result.exit_code == 1, result.output
    return json.loads(result.stdout)


def first_parent_count(repo: Path, good: str, bad: str) -> int:
    out = subprocess.run(
        ["git", "-C", str(repo), "rev-list", "--first-parent", "--count", f"{good}..{bad}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(out.stdout)


def test_kary_with_four_actors_takes_ceil_log5_rounds(demo: tuple[Path, DemoManifest]) -> None:
    repo, manifest = demo
    overwrite = manifest.bugs["target_verify_overwrite"]
    good, bad = manifest.untestable.mended, overwrite.fixed + "~1"
    report = bisect(repo, good, bad, "--strategy", "kary", "--workers", "4")
    n = first_parent_count(repo, good, bad)
    assert report["culprit"] == overwrite.introduced and report["confidence"] == 1.0
    # the two ends share the first round; then ceil(log5 n) rounds of four revisions each
    assert report["rounds"] <= math.ceil(math.log(n, 5)) + 1
    assert report["rounds"] < math.ceil(math.log2(n))


def test_killing_an_actor_mid_bisect_loses_no_step_and_gives_the_same_answer(
    demo: tuple[Path, DemoManifest], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, manifest = demo
    overwrite = manifest.bugs["target_verify_overwrite"]
    good, bad = manifest.untestable.mended, overwrite.fixed + "~1"
    monkeypatch.setenv("REGTRACK_DB_URL", f"sqlite:///{tmp_path / 'quiet.sqlite'}")
    quiet = bisect(repo, good, bad, "--strategy", "binary")

    monkeypatch.setenv("REGTRACK_DB_URL", f"sqlite:///{tmp_path / 'killed.sqlite'}")
    killed: list[int] = []
    done = threading.Event()

    def kill_an_actor_once_it_has_a_worker() -> None:
        while not done.is_set():
            hosts = actors_with_a_worker()
            if hosts:
                os.kill(hosts[0], signal.SIGKILL)
                killed.append(hosts[0])
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_an_actor_once_it_has_a_worker)
    killer.start()
    try:
        noisy = bisect(repo, good, bad, "--strategy", "binary")
    finally:
        done.set()
        killer.join()
    assert killed, "no actor was seen with a worker"
    assert noisy["culprit"] == quiet["culprit"] == overwrite.introduced
    assert noisy["executions"] == quiet["executions"]
    assert [(s["sha"], s["verdict"]) for s in noisy["steps"]] == [(s["sha"], s["verdict"]) for s in quiet["steps"]]


def actors_with_a_worker() -> list[int]:
    """Ray actors (``ray::SlotActor``) that have started their probe worker: the next moment they
    report their environment or run a case."""
    listing = subprocess.run(["ps", "-eo", "pid=,ppid=,args="], capture_output=True, text=True, check=True).stdout
    rows = [line.split(None, 2) for line in listing.splitlines()]
    actors = {int(pid) for pid, _, args in rows if args.startswith("ray::SlotActor")}
    return [int(ppid) for _, ppid, args in rows if "tracker.execution.worker" in args and int(ppid) in actors]


def test_more_actors_than_the_cluster_can_place_stop_the_command(tmp_path: Path) -> None:
    """Five one-CPU actors on a four-CPU cluster: the fifth is never placed. The command stops
    with a line that says so, instead of waiting for the fifth actor's answer for ever."""
    with pytest.raises(
        UsageError, match=r"no Ray node took an actor .* within 3s; add nodes or ask for fewer --workers"
    ):
        with executor(tmp_path, workers=GPUS + 1, start_timeout_s=3) as ray_executor:
            ray_executor.environment()
    with executor(tmp_path, workers=GPUS) as ray_executor:  # the unplaced actor was given back
        assert len(ray_executor.placements()) == GPUS


# -- a cluster that cannot be reached -------------------------------------------------------------

UNREACHABLE_IN_S = 60


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    repo = GitRepo(tmp_path / "repo")
    repo.commit("Initial import", {"check.sh": "exit 0\n"})
    return repo.path


def regtrack_process(checkout: Path, *args: str) -> subprocess.Popen[str]:
    """``regtrack run --executor ray ARGS HEAD`` in its own process, as a user's shell would start it."""
    env = {name: value for name, value in os.environ.items() if name not in ("RAY_ADDRESS", "REGTRACK_DB_URL")}
    env["REGTRACK_HOME"] = str(checkout.parent / "home")
    command = [
        sys.executable,
        "-m",
        "tracker.cli",
        "run",
        "--executor",
        "ray",
        *args,
        "--command",
        "sh check.sh",
        "HEAD",
    ]
    return subprocess.Popen(command, cwd=checkout, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finished(process: subprocess.Popen[str], within_s: float) -> tuple[str, str]:
    try:
        return process.communicate(timeout=within_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        pytest.fail(f"regtrack was still running after {within_s:g}s")


class SilentListener:
    """A port on every address of this host that accepts connections and never says a word (a
    tunnel or proxy whose far end is gone, a wedged server); ``dialled`` is set at the first one."""

    def __init__(self) -> None:
        self.server = socket.create_server(("", 0))
        self.port = self.server.getsockname()[1]
        self.dialled = threading.Event()
        self.connections: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            self.connections.append(connection)
            self.dialled.set()

    def close(self) -> None:
        self.server.close()
        for connection in self.connections:
            connection.close()


@pytest.fixture
def silent_listener() -> Iterator[SilentListener]:
    listener = SilentListener()
    yield listener
    listener.close()


def test_an_address_where_nothing_listens_is_one_line_and_exit_2_within_a_minute(checkout: Path) -> None:
    process = regtrack_process(checkout, "--ray-address", "127.0.0.1:1")
    _, stderr = finished(process, UNREACHABLE_IN_S)
    lines = stderr.strip().splitlines()
    assert process.returncode == 2 and len(lines) == 1, stderr
    assert lines[0].startswith("regtrack: error: cannot reach the Ray cluster at 127.0.0.1:1 (connection refused"), (
        lines[0]
    )
    assert "ray start --head" in lines[0] and "--ray-address" in lines[0]


def test_an_address_that_never_answers_is_one_line_and_exit_2_within_a_minute(
    checkout: Path, silent_listener: SilentListener
) -> None:
    process = regtrack_process(checkout, "--ray-address", f"127.0.0.1:{silent_listener.port}")
    _, stderr = finished(process, UNREACHABLE_IN_S)
    assert process.returncode == 2, stderr
    assert stderr.strip().startswith(
        f"regtrack: error: cannot reach the Ray cluster at 127.0.0.1:{silent_listener.port} (no answer within"
    )


def test_sigterm_stops_a_command_waiting_for_the_cluster_at_once(
    checkout: Path, silent_listener: SilentListener
) -> None:
    process = regtrack_process(checkout, "--ray-address", f"127.0.0.1:{silent_listener.port}")
    assert silent_listener.dialled.wait(60), "regtrack never dialled the cluster's address"
    time.sleep(2)
    assert process.poll() is None, "regtrack gave up before it was sent SIGTERM"
    process.send_signal(signal.SIGTERM)
    finished(process, 5)
    assert process.returncode == -signal.SIGTERM


def test_the_address_of_a_running_cluster_is_joined(checkout: Path) -> None:
    """The check of the address lets a live cluster through: a second process joins the one of this module."""
    address = ray.get_runtime_context().gcs_address
    process = regtrack_process(checkout, "--ray-address", address)
    stdout, stderr = finished(process, 120)
    assert process.returncode == 0, stderr
    assert "good" in stdout
