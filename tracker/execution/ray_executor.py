"""Jobs on a Ray cluster: one long-lived actor per slot, the driver alone writing results.

Each actor (one GPU or a fraction, one CPU) keeps for its life the worker ``LocalExecutor`` starts,
with its own ``CUDA_VISIBLE_DEVICES``. The repository is reached by the same path on every node, and
each actor makes snapshots in its node's own cache.

Lost actors: one that dies on a live node is replaced and its case retried once (a probe that
crashes kills the worker, never the actor), then stored as a crash; one whose node is lost is
retried on another node up to ``NODE_LOSSES_PER_CASE`` times. Only the driver stores results.
"""

from __future__ import annotations

import os
import socket
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracker.core.errors import UsageError
from tracker.core.verdicts import Outcome
from tracker.execution.client import WorkerClient
from tracker.execution.executors import case_timeout, default_log_dir
from tracker.execution.protocol import SELF_TIMED_GRACE_S, Job, JobResult

if TYPE_CHECKING:
    from tracker.core.records import EnvironmentInfo

ACTOR_DEATHS_PER_CASE = 2
"""An actor dying under a case this many times (on live nodes) makes the case a crash."""
ACTOR_DIED = "ray actor died running the case, twice"
NODE_LOSSES_PER_CASE = 5
"""Nodes that may be lost under one case before it is stored as a crash: a case is retried as
nodes are lost, but one that makes every node it runs on unreachable must end."""
NODES_LOST = f"ray lost the node running the case, {NODE_LOSSES_PER_CASE} times"
ACTOR_START_TIMEOUT_S = 300.0
"""How long a new actor may wait for a node with room for it before the command stops."""
START_FAILURES_PER_SLOT = 3
"""Replacement actors of one slot that may die before their first job before the command stops."""
RAY_ANSWER_TIMEOUT_S = 10.0
"""How long the address of the cluster to join may take to accept a connection, and then to answer."""
HTTP2_OPENING = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
"""HTTP/2's client preface and an empty SETTINGS frame: what a gRPC client sends first."""


@dataclass(frozen=True)
class Placement:
    """Where an actor runs, as it sees it."""

    node_id: str
    pid: int
    cuda_visible_devices: str | None


class SlotActor:
    """The body of one Ray actor: a probe worker on the actor's node and a snapshot cache there."""

    def __init__(self, log_dir: str | None, cache_root: str | None, env: Mapping[str, str]) -> None:
        from tracker.targets.snapshots import SnapshotCache

        logs = Path(log_dir) if log_dir else default_log_dir()
        self.client = WorkerClient(logs / f"ray-worker-{os.getpid()}.log", env)
        self.snapshots = SnapshotCache(Path(cache_root) if cache_root else None)

    def placement(self) -> Placement:
        import ray

        return Placement(ray.get_runtime_context().get_node_id(), os.getpid(), os.environ.get("CUDA_VISIBLE_DEVICES"))

    def environment(self, device: str, env: Mapping[str, str] | None) -> EnvironmentInfo:
        return self.client.environment(device, env)

    def run(self, job: Job, timeout_s: float) -> JobResult:
        if job.revision is not None:
            from tracker.targets.revisions import Repo

            revision = job.revision
            root = self.snapshots.materialise(Repo(Path(revision.repo)), revision.sha, revision.paths)
            job = replace(job, root=str(root), revision=None)
        return self.client.run(job, timeout_s if job.timeout_s is None else job.timeout_s + SELF_TIMED_GRACE_S)

    def close(self) -> None:
        self.client.close()


class RayExecutor:
    """W actors on a Ray cluster (``address``: ``auto``, ``ray://HOST:PORT``, or None for a local
    one, or whatever ``RAY_ADDRESS`` names), each running one job at a time.

    ``gpus_per_actor`` is what each actor asks Ray for (default 1 on ``cuda``, 0 on ``cpu``). An
    exception or Ctrl-C in ``run_iter`` kills every actor; the executor is closed after that.
    """

    makes_snapshots = True

    def __init__(
        self,
        device: str = "cpu",
        dtype: str = "float32",
        workers: int = 1,
        timeout_s: float | None = None,
        address: str | None = None,
        gpus_per_actor: float | None = None,
        log_dir: Path | None = None,
        cache_root: Path | None = None,
        env: Mapping[str, str] | None = None,
        start_timeout_s: float = ACTOR_START_TIMEOUT_S,
    ) -> None:
        if workers < 1:
            raise UsageError(f"the number of workers must be at least 1, not {workers}")
        ray = _ray()
        _ray_messages_to_stderr()
        if not ray.is_initialized():
            _join_cluster(address)
        self.device, self.dtype, self.timeout_s, self.start_timeout_s = device, dtype, timeout_s, start_timeout_s
        self.gpus_per_actor = (
            gpus_per_actor if gpus_per_actor is not None else (1.0 if device.startswith("cuda") else 0.0)
        )
        self._arguments = (str(log_dir) if log_dir else None, str(cache_root) if cache_root else None, dict(env or {}))
        self._remote = ray.remote(SlotActor).options(num_cpus=1, num_gpus=self.gpus_per_actor, max_restarts=0)
        self.actors: list[Any] = [self._start() for _ in range(workers)]
        self._placements: list[Placement | None] = [None] * workers
        self._expected: EnvironmentInfo | None = None
        self._checked: set[int] = set()
        self._start_failures = [0] * workers
        self._closed = False

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def case_timeout(self, target_timeout_s: float | None = None) -> float:
        return case_timeout(self.timeout_s, target_timeout_s)

    def placements(self) -> list[Placement]:
        """Where each slot's actor runs now."""
        return [self._placement(slot) for slot in range(len(self.actors))]

    def environment(self, env: Mapping[str, str] | None = None) -> EnvironmentInfo:
        """The stack every actor's worker reports; actors on stacks that differ stop the command."""
        ray = _ray()
        asked = {slot: actor.environment.remote(self.device, env) for slot, actor in enumerate(self.actors)}
        reports = {}
        for slot, reply in asked.items():
            try:
                self._placement(slot)  # an actor no node can take would leave the reply pending for ever
                reports[slot] = _get(reply)
            except ray.exceptions.RayActorError:
                reports[slot] = self._environment_of_replacement(slot, env)
        if len({report.fingerprint for report in reports.values()}) > 1:
            stacks = "; ".join(
                sorted({f"{r.host}: torch {r.torch}, python {r.python} ({r.fingerprint})" for r in reports.values()})
            )
            raise UsageError(f"the Ray actors run on different stacks ({stacks}); give every node the same environment")
        self._expected = reports[0]
        self._checked = set(range(len(self.actors)))
        return self._expected

    def _environment_of_replacement(self, slot: int, env: Mapping[str, str] | None) -> EnvironmentInfo:
        ray = _ray()
        for _ in range(START_FAILURES_PER_SLOT):
            self._replace(slot)
            try:
                self._placement(slot)
                return _get(self.actors[slot].environment.remote(self.device, env))
            except ray.exceptions.RayActorError:
                continue
        raise UsageError(
            f"Ray actors keep dying before their first job ({START_FAILURES_PER_SLOT} in a row); see the Ray logs"
        )

    def predicts_environment(self, env: Mapping[str, str] | None = None) -> bool:
        return False

    def run_iter(self, jobs: Sequence[Job], timeout_s: float | None = None) -> Iterator[tuple[int, JobResult]]:
        """Each job's index and result as it finishes; jobs start in order, each on the next free actor."""
        ray = _ray()
        limit = timeout_s if timeout_s is not None else self.case_timeout()
        waiting = deque(range(len(jobs)))
        deaths = [0] * len(jobs)
        losses = [0] * len(jobs)
        idle = deque(range(len(self.actors)))
        running: dict[Any, tuple[int, int]] = {}
        try:
            while waiting or running:
                while idle and waiting:
                    slot = idle.popleft()
                    if not self._ready(slot, jobs[waiting[0]].env):
                        idle.append(slot)
                        continue
                    index = waiting.popleft()
                    running[self.actors[slot].run.remote(jobs[index], limit)] = (slot, index)
                [done], _ = ray.wait(list(running), num_returns=1)
                slot, index = running.pop(done)
                try:
                    result = _get(done)
                except ray.exceptions.RayActorError as error:
                    node_lost = self._node_lost(slot, error)
                    self._replace(slot)
                    idle.append(slot)
                    deaths[index] += not node_lost
                    losses[index] += node_lost
                    if deaths[index] < ACTOR_DEATHS_PER_CASE and losses[index] < NODE_LOSSES_PER_CASE:
                        waiting.appendleft(index)
                        continue
                    result = JobResult(Outcome.CRASH, {}, ACTOR_DIED if not node_lost else NODES_LOST, "", 0.0)
                idle.append(slot)
                yield index, result
        except BaseException:
            self.kill()
            raise

    def run_many(self, jobs: Sequence[Job]) -> list[JobResult]:
        results = dict(self.run_iter(jobs))
        return [results[index] for index in range(len(jobs))]

    def kill(self) -> None:
        """Kill every actor at once (Ctrl-C, an error); the executor cannot be used after."""
        ray = _ray()
        self._closed = True
        for actor in self.actors:
            ray.kill(actor)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        ray = _ray()
        try:
            ray.get([actor.close.remote() for actor in self.actors], timeout=30)
        except (ray.exceptions.RayError, TimeoutError):
            pass
        for actor in self.actors:
            ray.kill(actor)

    def _start(self) -> Any:
        return self._remote.remote(*self._arguments)

    def _replace(self, slot: int) -> None:
        _ray().kill(self.actors[slot])
        self.actors[slot] = self._start()
        self._placements[slot] = None
        self._checked.discard(slot)

    def _placement(self, slot: int) -> Placement:
        if self._placements[slot] is None:
            ray = _ray()
            try:
                self._placements[slot] = ray.get(self.actors[slot].placement.remote(), timeout=self.start_timeout_s)
            except ray.exceptions.GetTimeoutError:
                raise UsageError(
                    f"no Ray node took an actor (1 CPU, {self.gpus_per_actor:g} GPU) within {self.start_timeout_s:g}s; "
                    "add nodes or ask for fewer --workers"
                ) from None
        placement = self._placements[slot]
        assert placement is not None
        return placement

    def _node_lost(self, slot: int, error: Exception) -> bool:
        """Whether the actor of ``slot`` was lost with its node rather than killed on a live one.
        Ray says so at once by the error (the actor cannot be reached: its node or the way to it is
        gone; a process killed on a live node is reported dead by that node), and later by the node
        list, where a lost node stays alive until the cluster's health checks give up on it."""
        unreachable = getattr(_ray().exceptions, "ActorUnavailableError", None)
        if unreachable is not None and isinstance(error, unreachable):
            return True
        placement = self._placements[slot]
        if placement is None:
            return False
        alive = {node["NodeID"] for node in _ray().nodes() if node.get("Alive")}
        return placement.node_id not in alive

    def _ready(self, slot: int, env: Mapping[str, str]) -> bool:
        """Whether the actor of ``slot`` is alive and checked; a dead one is replaced (False), up to
        ``START_FAILURES_PER_SLOT`` times in a row."""
        ray = _ray()
        try:
            self._check_environment(slot, env)
        except ray.exceptions.RayActorError as exc:
            self._start_failures[slot] += 1
            if self._start_failures[slot] >= START_FAILURES_PER_SLOT:
                raise UsageError(f"Ray actors keep dying before their first job ({exc}); see the Ray logs") from None
            self._replace(slot)
            return False
        self._start_failures[slot] = 0
        return True

    def _check_environment(self, slot: int, env: Mapping[str, str]) -> None:
        """A new actor reports its stack before its first job; one unlike the stack results are
        stored under stops the command. Its placement is learnt too, to tell a lost node later."""
        self._placement(slot)
        if self._expected is None or slot in self._checked:
            return
        reported = _get(self.actors[slot].environment.remote(self.device, env))
        if reported.fingerprint != self._expected.fingerprint:
            raise UsageError(
                f"a Ray actor on {reported.host} reports another environment ({reported.fingerprint}) than the one "
                f"results are stored under ({self._expected.fingerprint}); give every node the same environment"
            )
        self._checked.add(slot)


def _get(ref: Any) -> Any:
    """``ray.get``, re-raising a ``UsageError`` the actor raised as itself (one line for the user)."""
    ray = _ray()
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        if isinstance(exc.cause, UsageError):
            raise exc.cause from None
        raise


def _join_cluster(address: str | None) -> None:
    """``ray.init``, once the cluster's address answers. Ray itself retries an address where nothing
    answers for many minutes, deaf to SIGTERM while it waits, and never says why."""
    named = _named_address(address)
    try:
        dialled = _dialled_address(named)
        if dialled is not None:
            _check_answers(*dialled)
        _ray().init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
    except ConnectionError as exc:
        raise UsageError(
            f"cannot reach the Ray cluster at {named or 'the address `ray start` last recorded'} ({exc}); "
            "start it with `ray start --head`, or pass the address of a running one with --ray-address (or RAY_ADDRESS)"
        ) from None


def _named_address(address: str | None) -> str | None:
    """The address ``ray.init(address=address)`` joins: RAY_ADDRESS stands for none or "auto"."""
    if address in (None, "auto"):
        return os.environ.get("RAY_ADDRESS") or address
    return address


def _dialled_address(address: str | None) -> tuple[str, int] | None:
    """The host and port Ray dials for ``address`` (a client's ``ray://HOST:PORT``; this host's
    address for "localhost"), or None where Ray starts a cluster of its own."""
    try:
        if address is not None and "://" in address:
            dialled: str | None = address.split("://", 1)[1]
        else:
            from ray._private.services import canonicalize_bootstrap_address

            dialled = canonicalize_bootstrap_address(address)
        if dialled is None:
            return None
        host, _, port = dialled.rpartition(":")
        return host.strip("[]"), int(port)
    except ValueError as exc:
        raise UsageError(f"{address!r} is not a Ray address ({exc}); pass HOST:PORT, ray://HOST:PORT or auto") from None


def _check_answers(host: str, port: int) -> None:
    """Raise ConnectionError unless something at ``host``:``port`` accepts a connection and answers
    the opening of an HTTP/2 exchange, as the gRPC servers of a Ray cluster do, each within
    ``RAY_ANSWER_TIMEOUT_S``. SIGTERM ends the wait at once (Ray sets a handler of its own later)."""
    try:
        with socket.create_connection((host, port), timeout=RAY_ANSWER_TIMEOUT_S) as connection:
            connection.sendall(HTTP2_OPENING)
            answer = connection.recv(1)
    except TimeoutError:
        raise ConnectionError(f"no answer within {RAY_ANSWER_TIMEOUT_S:g}s at {host}:{port}") from None
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConnectionError(f"{reason[:1].lower()}{reason[1:]} at {host}:{port}") from None
    if not answer:
        raise ConnectionError(f"{host}:{port} closed the connection without answering")


def _ray_messages_to_stderr() -> None:
    """Send what Ray's driver thread prints about the cluster (an actor that died, which this
    executor handles) to stderr: Ray prints it to stdout, where it would break ``--json``, and has
    no setting to move it. Ray looks the printer up as a module global on every message."""
    import ray._private.worker as ray_worker

    printer = ray_worker.print_to_stdstream
    if getattr(printer, "regtrack_stderr", False):
        return

    def to_stderr(data: dict[str, Any], ignore_prefix: bool) -> None:
        printer({**data, "is_err": True}, ignore_prefix)

    to_stderr.regtrack_stderr = True  # type: ignore[attr-defined]
    ray_worker.print_to_stdstream = to_stderr


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UsageError("the Ray executor needs Ray; install it with pip install 'regtrack[ray]'") from None
    return ray
