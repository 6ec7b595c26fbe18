"""Where jobs run: the interface every executor offers, and the pool of local worker processes, one
per GPU or CPU slot (``tracker.execution.ray_executor`` has the one on a Ray cluster)."""

from __future__ import annotations

import os
import queue
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from tracker.core.errors import UsageError
from tracker.execution.client import WorkerClient
from tracker.execution.protocol import SELF_TIMED_GRACE_S, Job, JobResult

if TYPE_CHECKING:
    from tracker.core.records import EnvironmentInfo

KEEP_LOGS = 32
DEFAULT_TIMEOUT_S = 300.0
PCI_ORDER = "PCI_BUS_ID"


class Executor(Protocol):
    """Runs probe jobs somewhere and hands their results back to the one process that stores them."""

    device: str
    dtype: str
    timeout_s: float | None
    makes_snapshots: bool
    """True: jobs carry a ``Revision`` and are materialised where they run, not by the caller."""

    def __enter__(self) -> Executor: ...

    def __exit__(self, *exc_info: object) -> None: ...

    def case_timeout(self, target_timeout_s: float | None = None) -> float: ...

    def run_iter(self, jobs: Sequence[Job], timeout_s: float | None = None) -> Iterator[tuple[int, JobResult]]: ...

    def run_many(self, jobs: Sequence[Job]) -> list[JobResult]: ...

    def environment(self, env: Mapping[str, str] | None = None) -> EnvironmentInfo: ...

    def predicts_environment(self, env: Mapping[str, str] | None = None) -> bool: ...

    def close(self) -> None: ...


class LocalExecutor:
    """W worker processes on this machine, started lazily; each runs one job at a time.

    With ``device="cuda"`` worker i sees only the i-th visible GPU (``CUDA_VISIBLE_DEVICES``,
    counted as nvidia-smi counts them, wrapping around when there are more workers than GPUs). CPU
    workers split the cores between them.
    An exception or Ctrl-C in ``run_iter`` kills every worker; the executor is closed after that.
    ``timeout_s`` None (no ``--timeout``) lets each target's own timeout stand (``case_timeout``).
    """

    makes_snapshots = False

    def __init__(
        self,
        device: str = "cpu",
        dtype: str = "float32",
        workers: int = 1,
        timeout_s: float | None = None,
        log_dir: Path | None = None,
        env: Mapping[str, str] | None = None,
        *,
        gpu_told_by_nvidia_smi: bool = False,
    ):
        if workers < 1:
            raise UsageError(f"the number of workers must be at least 1, not {workers}")
        self.device = device
        self.dtype = dtype
        self.timeout_s = timeout_s
        self._env = dict(env or {})
        self.gpu_told_by_nvidia_smi = gpu_told_by_nvidia_smi
        self._expected: EnvironmentInfo | None = None
        """The stack results are stored under: predicted in this process, or the first worker's report."""
        self._reported_by_worker = False
        """Whether ``_expected`` is a worker's report, not this process's prediction."""
        self._confirmed: set[int] = set()
        """The slots whose worker reported the expected environment."""
        log_dir = log_dir or default_log_dir()
        _prune_logs(log_dir, KEEP_LOGS)
        gpus = _visible_gpus() if device == "cuda" else []
        self._first_gpu = gpus[0] if gpus else None
        """The first worker's ``CUDA_VISIBLE_DEVICES`` (None: this process's)."""
        self.clients = [
            WorkerClient(
                log_dir / f"worker-{os.getpid()}-{slot}.log", {**(env or {}), **_slot_env(slot, workers, gpus)}
            )
            for slot in range(workers)
        ]
        self._idle: queue.SimpleQueue[WorkerClient] = queue.SimpleQueue()
        for client in self.clients:
            self._idle.put(client)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="regtrack-worker")

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def job(self, probe: str, case_id: str, root: Path | str, seed: int = 0) -> Job:
        return Job(probe, case_id, str(root), self.device, self.dtype, seed)

    def case_timeout(self, target_timeout_s: float | None = None) -> float:
        return case_timeout(self.timeout_s, target_timeout_s)

    def run_iter(self, jobs: Sequence[Job], timeout_s: float | None = None) -> Iterator[tuple[int, JobResult]]:
        """Each job's index and result as soon as it finishes; jobs start in order, each on the
        next free worker, each given ``timeout_s`` (default: ``case_timeout()``)."""
        limit = timeout_s if timeout_s is not None else self.case_timeout()
        futures = {self._pool.submit(self._run_one, job, limit): index for index, job in enumerate(jobs)}
        try:
            for future in as_completed(futures):
                yield futures[future], future.result()
        except BaseException:
            for future in futures:
                future.cancel()
            for client in self.clients:
                client.kill()
            raise

    def run_many(self, jobs: Sequence[Job]) -> list[JobResult]:
        """Results in job order."""
        results = dict(self.run_iter(jobs))
        return [results[index] for index in range(len(jobs))]

    def environment(self, env: Mapping[str, str] | None = None) -> EnvironmentInfo:
        """The workers' stack, as a worker started with ``env`` (the variables its jobs carry) reports it.

        On the CPU a worker is this interpreter with its installed distributions, so unless the
        variables change where Python finds them this process answers without starting one (most of
        a command that finds everything stored); a local GPU's stack is told by nvidia-smi where the
        executor is made to (``gpu_told_by_nvidia_smi``). Otherwise the first worker asked answers.
        Either way each worker that starts for a job reports its own stack before it runs anything,
        and one that differs stops the command (``_confirm``).
        """
        predicted = self._predict(env)
        if predicted is not None:
            return predicted
        client = self._idle.get()
        try:
            return self._confirm(client, env)
        finally:
            self._idle.put(client)

    def predicts_environment(self, env: Mapping[str, str] | None = None) -> bool:
        """Whether ``environment(env)`` answers in this process, without starting a worker."""
        return self._predict(env) is not None

    def _predict(self, env: Mapping[str, str] | None) -> EnvironmentInfo | None:
        """This process's answer for the workers' stack, where it can give one: on the CPU, and on a
        GPU where ``gpu_told_by_nvidia_smi`` allows it and nvidia-smi describes the first worker's."""
        env = {**self._env, **(env or {})}
        cpu = self.device == "cpu"
        if self._reported_by_worker or _moves_python(env):
            return None
        if not (cpu or (self.gpu_told_by_nvidia_smi and _counts_gpus_as_nvidia_smi(env))):
            return None
        if self._expected is None:
            from tracker.execution.environment import environment, environment_told_by_nvidia_smi

            predicted = (
                environment(self.device) if cpu else environment_told_by_nvidia_smi(self.device, self._first_gpu)
            )
            if predicted is None:
                return None
            self._expected = predicted
        return self._expected

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        for client in self.clients:
            client.close()

    def _run_one(self, job: Job, timeout_s: float) -> JobResult:
        client = self._idle.get()
        try:
            self._confirm(client, job.env)
            return client.run(job, timeout_s if job.timeout_s is None else job.timeout_s + SELF_TIMED_GRACE_S)
        finally:
            self._idle.put(client)

    def _confirm(self, client: WorkerClient, env: Mapping[str, str] | None) -> EnvironmentInfo:
        """The stack of ``client``'s worker, asked once. Where this process predicted none, the first
        report is the stack results are stored under; a worker on another stack stops the command
        before it runs anything."""
        slot = self.clients.index(client)
        if self._expected is not None and slot in self._confirmed:
            return self._expected
        reported = client.environment(self.device, env)
        if self._expected is None:
            self._expected, self._reported_by_worker = reported, True
        elif reported != self._expected:
            raise self._differs(reported)
        self._confirmed.add(slot)
        return reported

    def _differs(self, reported: EnvironmentInfo) -> Exception:
        """What stops a command whose worker reports ``reported``, not the expected stack."""
        expected = self._expected
        assert expected is not None
        if self._reported_by_worker:
            return UsageError(
                f"the probe workers run on different stacks ({_gpu_of(expected)}, torch {expected.torch}; "
                f"{_gpu_of(reported)}, torch {reported.torch}); "
                "give them GPUs of one kind with CUDA_VISIBLE_DEVICES, or pass --workers 1"
            )
        if self.device != "cpu":
            return EnvironmentRefuted(
                f"the probe worker describes the GPU as {_gpu_of(reported)}, nvidia-smi as {_gpu_of(expected)}"
            )
        return UsageError(
            f"the probe worker reports another environment ({reported.fingerprint}: torch {reported.torch}, "
            f"python {reported.python}) than regtrack ({expected.fingerprint}: torch {expected.torch}, "
            f"python {expected.python}); run regtrack with the interpreter its workers use"
        )


class EnvironmentRefuted(Exception):
    """A worker describes its GPU otherwise than nvidia-smi did, before any job ran. What the command
    looked up so far it looked up under nvidia-smi's description, so it measures again with an
    executor whose workers tell their stack (``tracker.probing``)."""


def _gpu_of(env: EnvironmentInfo) -> str:
    return (
        f"{env.gpu_name or 'no GPU'} (compute capability {env.compute_capability or 'none'}, "
        f"driver {env.driver or 'none'})"
    )


def _moves_python(env: Mapping[str, str]) -> bool:
    """Whether variables change where a Python process finds its modules and distributions."""
    return any(name.startswith("PYTHON") or name == "VIRTUAL_ENV" for name in env)


def _counts_gpus_as_nvidia_smi(env: Mapping[str, str]) -> bool:
    """Whether the first worker's GPU is the one nvidia-smi names by the executor's count: the
    target's variables pick no GPU of their own, and CUDA counts GPUs in nvidia-smi's order."""
    order = env.get("CUDA_DEVICE_ORDER", os.environ.get("CUDA_DEVICE_ORDER", PCI_ORDER))
    return "CUDA_VISIBLE_DEVICES" not in env and order == PCI_ORDER


def _slot_env(slot: int, workers: int, gpus: list[str]) -> dict[str, str]:
    """A GPU worker's GPU, counted as nvidia-smi counts them (bus order, where CUDA's own puts the
    fastest first) unless this process says otherwise; a CPU worker's share of the cores."""
    if gpus:
        return {
            "CUDA_VISIBLE_DEVICES": gpus[slot % len(gpus)],
            "CUDA_DEVICE_ORDER": os.environ.get("CUDA_DEVICE_ORDER", PCI_ORDER),
        }
    if workers > 1 and "OMP_NUM_THREADS" not in os.environ:
        return {"OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // workers))}
    return {}


def _visible_gpus() -> list[str]:
    """This process's GPUs as ``CUDA_VISIBLE_DEVICES`` entries; empty when none can be found."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [g.strip() for g in visible.split(",") if g.strip()]
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, line in enumerate(listing.splitlines()) if line.startswith("GPU ")]


def case_timeout(given_s: float | None, target_timeout_s: float | None) -> float:
    """Seconds one case may take: ``--timeout`` when given, else the target's, else the default."""
    if given_s is not None:
        return given_s
    return target_timeout_s if target_timeout_s is not None else DEFAULT_TIMEOUT_S


def default_log_dir() -> Path:
    from db.paths import cache_dir

    return cache_dir() / "logs"


def _prune_logs(log_dir: Path, keep: int) -> None:
    """Remove all but the ``keep`` newest worker logs."""
    if not log_dir.is_dir():
        return
    logs = sorted(log_dir.glob("worker-*.log"), key=_mtime, reverse=True)
    for log in logs[keep:]:
        log.unlink(missing_ok=True)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0
