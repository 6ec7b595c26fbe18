"""The Ray executor on a cluster of several nodes (``ray.cluster_utils.Cluster``: a head that runs
nothing and three one-CPU nodes, real raylets on this machine): a case whose node is lost runs
again on another node, as often as nodes are lost, and its one result is a pass, not a crash."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from worker_probes import __file__ as worker_probes_file

from tracker.core.verdicts import Outcome
from tracker.execution.protocol import Job
from tracker.execution.ray_executor import RayExecutor

if os.environ.get("CI"):
    import ray  # CI installs the ray extra: a missing Ray must fail there, not skip
else:
    ray = pytest.importorskip("ray")

from ray.cluster_utils import Cluster  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.slow]

TEST_ENV = {"REGTRACK_PROBE_MODULES": "worker_probes", "PYTHONPATH": str(Path(worker_probes_file).resolve().parent)}
NODES = 3


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0}, connect=True)
    for _ in range(NODES):
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


def node_running_a_case(cluster: Cluster, lost: list[str]) -> str | None:
    """The node whose actor has a probe worker, on a node not lost yet: an actor's parent process
    is its node's raylet."""
    raylets = {node.all_processes["raylet"][0].process.pid: node.node_id for node in cluster.worker_nodes}
    listing = subprocess.run(["ps", "-eo", "pid=,ppid=,args="], capture_output=True, text=True, check=True).stdout
    rows = [line.split(None, 2) for line in listing.splitlines() if len(line.split(None, 2)) == 3]
    actors = {int(pid): int(ppid) for pid, ppid, args in rows if args.startswith("ray::SlotActor")}
    for _, ppid, args in rows:
        node = raylets.get(actors.get(int(ppid), -1))
        if "tracker.execution.worker" in args and node is not None and node not in lost:
            return node
    return None


def test_a_case_whose_node_is_lost_runs_again_on_another_node_each_time(cluster: Cluster, tmp_path: Path) -> None:
    nodes = {node.node_id: node for node in cluster.worker_nodes}
    lost: list[str] = []
    done = threading.Event()

    def lose_the_node_of_the_running_case_twice() -> None:
        while len(lost) < 2 and not done.is_set():
            node = node_running_a_case(cluster, lost)
            if node is None:
                time.sleep(0.05)
                continue
            time.sleep(1.0)  # into the case, which takes three seconds
            cluster.remove_node(nodes[node], allow_graceful=False)
            lost.append(node)

    with RayExecutor("cpu", "float32", 1, timeout_s=60, log_dir=tmp_path / "logs", env=TEST_ENV) as executor:
        loser = threading.Thread(target=lose_the_node_of_the_running_case_twice)
        loser.start()
        try:
            results = list(executor.run_iter([Job("worker_test_where", "slow", str(tmp_path), "cpu", "float32", 0)]))
        finally:
            done.set()
            loser.join()
        [survivor] = executor.placements()
    assert len(lost) == 2, "the case ended before two nodes were lost"
    # two actor deaths on live nodes make a crash; node losses are the cluster's, not the case's
    assert [(index, result.outcome) for index, result in results] == [(0, Outcome.PASS)]
    assert survivor.node_id in nodes and survivor.node_id not in lost
