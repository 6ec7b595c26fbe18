"""The probe worker and the local executor, with real worker subprocesses (CPU)."""

from __future__ import annotations

import os
import platform
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from probes.sources import command_spec
from tracker.core.errors import UsageError
from tracker.core.verdicts import Outcome
from tracker.demo.bugs import BROKEN_IMPORT, TARGET_VERIFY_OVERWRITE, apply_edits, read_tree, write_tree
from tracker.execution.client import WorkerClient
from tracker.execution.executors import LocalExecutor
from tracker.execution.protocol import SELF_TIMED_GRACE_S, Job

PROJECT_ROOT = Path(__file__).resolve().parent.parent
TEST_ENV = {
    "REGTRACK_PROBE_MODULES": "worker_probes,exiting_probes",
    "PYTHONPATH": str(Path(__file__).resolve().parent),
}
PROBE, CASE = "target_verify_metadata", "N4-T2-bs4-p16"


def job(probe: str = PROBE, case: str = CASE, root: Path = PROJECT_ROOT) -> Job:
    return Job(probe, case, str(root), "cpu", "float32", 0)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def gone(pid: int, within_s: float = 3.0) -> bool:
    deadline = time.monotonic() + within_s
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def holders(directory: Path) -> list[int]:
    """Processes with a file under ``directory`` open: every worker holds its log as stderr."""
    pids = []
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            targets = [os.readlink(fd) for fd in fd_dir.iterdir()]
        except OSError:
            continue
        if any(target.startswith(str(directory)) for target in targets):
            pids.append(int(fd_dir.parent.name))
    return pids


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerClient]:
    with WorkerClient(tmp_path_factory.mktemp("worker") / "worker.log", TEST_ENV) as worker:
        yield worker


@pytest.fixture(scope="module")
def buggy_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("buggy")
    write_tree(apply_edits(read_tree(PROJECT_ROOT), [TARGET_VERIFY_OVERWRITE.edit]), root)
    return root


@pytest.fixture(scope="module")
def broken_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("broken")
    write_tree(apply_edits(read_tree(PROJECT_ROOT), [BROKEN_IMPORT]), root)
    return root


def test_a_job_at_the_project_root_passes_and_records_its_duration(client: WorkerClient) -> None:
    result = client.run(job(), timeout_s=60)
    assert (result.outcome, result.signature) == (Outcome.PASS, None)
    assert result.duration_s > 0
    assert client.start_s is not None and client.start_s > 0


def test_one_worker_loads_each_revision_fresh(client: WorkerClient, buggy_root: Path) -> None:
    client.start()
    pid = client.pid
    results = [client.run(job(root=root), timeout_s=60) for root in (PROJECT_ROOT, buggy_root, PROJECT_ROOT)]
    assert [r.outcome for r in results] == [Outcome.PASS, Outcome.FAIL, Outcome.PASS]
    assert "max_seq_len_q off by +2" in (results[1].signature or "")
    assert client.pid == pid


def test_a_revision_that_does_not_import_is_an_error(client: WorkerClient, broken_root: Path) -> None:
    result = client.run(job(root=broken_root), timeout_s=60)
    assert (result.outcome, result.signature) == (Outcome.ERROR, "import error: ModuleNotFoundError")


def test_what_a_probe_prints_or_reads_never_touches_the_protocol(client: WorkerClient) -> None:
    result = client.run(job("worker_test_spam", "flood"), timeout_s=60)
    assert result.outcome is Outcome.PASS
    assert result.metrics == {"lines": 20000.0, "stdin_bytes": 0.0}
    log = client.log_path.read_text()
    assert '"line": 19999' in log and "raw bytes without a newline" in log
    assert client.run(job(), timeout_s=60).outcome is Outcome.PASS


def test_an_unknown_probe_or_case_is_a_usage_error_and_the_worker_stays(client: WorkerClient) -> None:
    client.start()
    pid = client.pid
    with pytest.raises(UsageError, match="unknown probe 'nope'"):
        client.run(job("nope"), timeout_s=60)
    with pytest.raises(UsageError, match="has no case 'nope'"):
        client.run(job(case="nope"), timeout_s=60)
    assert client.pid == pid


def test_the_environment_names_python_torch_and_no_gpu_on_cpu(client: WorkerClient) -> None:
    env = client.environment("cpu")
    assert (env.device, env.python, env.torch) == ("cpu", platform.python_version(), torch.__version__)
    assert (env.gpu_name, env.compute_capability, env.driver) == (None, None, None)
    assert env.host and len(env.fingerprint) == 16


def test_a_crash_is_an_outcome_and_the_next_job_runs_on_a_fresh_worker(client: WorkerClient) -> None:
    client.start()
    first = client.pid
    segfault = client.run(job("worker_test_crash", "segfault"), timeout_s=60)
    assert (segfault.outcome, segfault.signature) == (Outcome.CRASH, "worker died (SIGSEGV)")
    assert "Segmentation fault" in segfault.detail and "in crash" in segfault.detail
    assert first is not None and gone(first) and client.pid is None
    exited = client.run(job("worker_test_crash", "exit3"), timeout_s=60)
    assert (exited.outcome, exited.signature) == (Outcome.CRASH, "worker exited with code 3")
    assert client.run(job(), timeout_s=60).outcome is Outcome.PASS
    assert client.pid not in (None, first)


@pytest.mark.parametrize(
    ("how", "signature"),
    [
        ("sys.exit()", "probe exited with status 0"),
        ("sys.exit(1)", "probe exited with status 1"),
        ("sys.exit(3)", "probe exited with status 3"),
        ("SystemExit", "probe exited with status 3"),
        ("KeyboardInterrupt", "probe raised KeyboardInterrupt"),
        ("SIGINT", "probe raised KeyboardInterrupt"),
    ],
)
def test_a_probe_that_exits_or_is_interrupted_crashes_and_the_worker_stays(
    client: WorkerClient, how: str, signature: str
) -> None:
    client.start()
    pid = client.pid
    result = client.run(job("exit_test_leave", how), timeout_s=60)
    assert (result.outcome, result.signature) == (Outcome.CRASH, signature)
    assert client.pid == pid


def test_a_worker_that_exits_on_its_own_after_closing_its_pipe_is_read_as_an_exit(client: WorkerClient) -> None:
    result = client.run(job("exit_test_close_pipes", "exit"), timeout_s=60)
    assert (result.outcome, result.signature) == (Outcome.CRASH, "worker exited with code 3")


@pytest.mark.slow
def test_a_worker_regtrack_killed_after_it_closed_its_pipe_is_a_crash_not_out_of_memory(client: WorkerClient) -> None:
    result = client.run(job("exit_test_close_pipes", "hang"), timeout_s=60)
    assert (result.outcome, result.signature) == (Outcome.CRASH, "worker closed its pipe and was killed 5s later")


def test_a_sigkill_from_outside_is_untestable_and_says_out_of_memory_is_likely(client: WorkerClient) -> None:
    result = client.run(job("exit_test_sigkill", "only"), timeout_s=60)
    assert (result.outcome, result.signature) == (Outcome.ERROR, "worker killed by SIGKILL, out of memory?")
    assert client.run(job(), timeout_s=60).outcome is Outcome.PASS


def test_a_worker_regtrack_killed_itself_yields_no_result(tmp_path: Path) -> None:
    with WorkerClient(tmp_path / "worker.log", TEST_ENV) as worker:
        worker.start()
        killer = threading.Timer(1.0, worker.kill)
        killer.start()
        with pytest.raises(RuntimeError, match="killed"):
            worker.run(job("worker_test_hang", "forever"), timeout_s=60)
        killer.join()


def command_job(script: str, root: Path, timeout_s: float) -> Job:
    spec = command_spec("detaches", ["sh", "-c", script], root)
    return Job(spec.name, "command", str(root), "cpu", "float32", 0, source=spec.to_json(), timeout_s=timeout_s)


def vanished(pid: int, within_s: float = 3.0) -> bool:
    """Whether ``pid`` is gone and reaped (no zombie left either)."""
    deadline = time.monotonic() + within_s
    while Path(f"/proc/{pid}").exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.parametrize(("ending", "outcome"), [("exit 0", Outcome.PASS), ("sleep 60", Outcome.TIMEOUT)])
def test_what_a_command_detached_with_setsid_is_gone_once_its_case_is_over(
    client: WorkerClient, tmp_path: Path, ending: str, outcome: Outcome
) -> None:
    pid_file = tmp_path / "detached.pid"
    detach = f"setsid sh -c 'echo $$ > {pid_file}; exec sleep 1000' & while [ ! -s {pid_file} ]; do sleep 0.01; done"
    result = client.run(command_job(f"{detach}; {ending}", tmp_path, timeout_s=2), timeout_s=2 + SELF_TIMED_GRACE_S)
    assert result.outcome is outcome
    assert vanished(int(pid_file.read_text()))


def test_a_hang_times_out_kills_the_process_group_and_restarts(client: WorkerClient) -> None:
    client.start()
    first = client.pid
    result = client.run(job("worker_test_hang", "forever"), timeout_s=2)
    assert (result.outcome, result.signature) == (Outcome.TIMEOUT, "timed out after 2s")
    assert "in hang" in result.detail
    match = re.search(r"child pid (\d+)", result.detail)
    assert match and gone(int(match.group(1)))
    assert first is not None and gone(first)
    assert client.run(job(), timeout_s=60).outcome is Outcome.PASS
    assert client.pid != first


def test_ctrl_c_while_waiting_kills_the_worker_and_propagates(client: WorkerClient) -> None:
    client.start()
    pid = client.pid
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        client.run(job("worker_test_hang", "forever"), timeout_s=60)
    timer.join()
    assert pid is not None and gone(pid) and client.pid is None


def test_a_probe_module_that_does_not_import_is_a_usage_error(tmp_path: Path) -> None:
    with WorkerClient(tmp_path / "worker.log", {"REGTRACK_PROBE_MODULES": "no_such_probes"}) as worker:
        with pytest.raises(UsageError, match="cannot import probe module 'no_such_probes'"):
            worker.start()
        assert worker.pid is None


def test_a_worker_dies_with_its_parent(tmp_path: Path) -> None:
    script = (
        "import sys, time; from pathlib import Path; from tracker.execution.client import WorkerClient\n"
        f"w = WorkerClient(Path({str(tmp_path / 'worker.log')!r})); w.start(); print(w.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env)
    assert parent.stdout is not None
    worker_pid = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    parent.stdout.close()
    assert gone(worker_pid)


def test_the_executor_runs_jobs_in_order_over_two_workers_and_leaves_none(
    tmp_path: Path, buggy_root: Path, broken_root: Path
) -> None:
    with LocalExecutor(workers=2, timeout_s=60, log_dir=tmp_path, env=TEST_ENV) as executor:
        roots = (PROJECT_ROOT, buggy_root, broken_root, PROJECT_ROOT)
        results = executor.run_many([executor.job(PROBE, CASE, root) for root in roots])
        pids = [c.pid for c in executor.clients]
    assert [r.outcome for r in results] == [Outcome.PASS, Outcome.FAIL, Outcome.ERROR, Outcome.PASS]
    assert None not in pids and len(set(pids)) == 2
    assert all(gone(pid) for pid in pids if pid is not None) and holders(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"worker-{os.getpid()}-{i}.log" for i in (0, 1)]


def test_ctrl_c_in_the_executor_kills_every_worker(tmp_path: Path) -> None:
    with LocalExecutor(workers=2, timeout_s=60, log_dir=tmp_path, env=TEST_ENV) as executor:

        def interrupt_once_both_hang() -> None:
            logs = [tmp_path / f"worker-{os.getpid()}-{i}.log" for i in (0, 1)]
            while not all(log.exists() and "child pid" in log.read_text() for log in logs):
                time.sleep(0.05)
            os.kill(os.getpid(), signal.SIGINT)

        interrupter = threading.Thread(target=interrupt_once_both_hang)
        interrupter.start()
        with pytest.raises(KeyboardInterrupt):
            executor.run_many([executor.job("worker_test_hang", "forever", PROJECT_ROOT)] * 2)
        interrupter.join()
    assert holders(tmp_path) == []
