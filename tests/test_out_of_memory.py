"""A SIGKILL from the kernel's OOM killer is said so outright: a real worker, and real commands, run
in a memory cgroup of their own with a small limit, and allocate until the kernel kills them.
Skips where no memory cgroup can be made (not root, no cgroup filesystem, cgroup v2 without the
memory controller delegated)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from probes.sources import command_spec

PROJECT_ROOT = Path(__file__).resolve().parent.parent
LIMIT_BYTES = 384 << 20
ALLOCATE = "hoard = []\nwhile True:\n    hoard.append(bytearray(1 << 20))"
DRIVER = """\
import json, os, sys
from pathlib import Path
from tracker.execution.client import WorkerClient
from tracker.execution.protocol import Job

Path(sys.argv[1]).write_text(str(os.getpid()))
jobs = [Job(**job) for job in json.loads(sys.argv[2])]
with WorkerClient(Path(sys.argv[3]), {"REGTRACK_PROBE_MODULES": "exiting_probes"}) as worker:
    results = [worker.run(job, timeout_s=120) for job in jobs]
print(json.dumps([[result.outcome.value, result.signature] for result in results]))
"""


def _memory_cgroup_dir() -> tuple[Path, str] | None:
    """This process's memory cgroup directory and the name of its limit file, v1 or v2."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return Path("/sys/fs/cgroup/memory") / path.lstrip("/"), "memory.limit_in_bytes"
        if controllers == "":
            for mount in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified")):
                control = mount / path.lstrip("/") / "cgroup.subtree_control"
                if control.exists() and "memory" in control.read_text().split():
                    return control.parent, "memory.max"
    return None


@pytest.fixture
def small_cgroup() -> Iterator[Path]:
    found = _memory_cgroup_dir()
    if found is None:
        pytest.skip("no memory cgroup this process could make a child of")
    parent, limit_file = found
    cgroup = parent / f"regtrack-oom-test-{os.getpid()}"
    try:
        cgroup.mkdir()
        (cgroup / limit_file).write_text(str(LIMIT_BYTES))
    except OSError as exc:
        if cgroup.exists():
            cgroup.rmdir()
        pytest.skip(f"cannot make a memory cgroup under {parent}: {exc}")
    joined = subprocess.run(["sh", "-c", f'echo $$ > "{cgroup / "cgroup.procs"}"'], capture_output=True, text=True)
    if joined.returncode != 0:
        _remove(cgroup)
        pytest.skip(f"cannot move a process into {cgroup}: {joined.stderr.strip()}")
    try:
        yield cgroup
    finally:
        _remove(cgroup)


def _remove(cgroup: Path) -> None:
    deadline = time.monotonic() + 10
    while True:
        try:
            cgroup.rmdir()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def command_job(argv: list[str], root: Path) -> dict:
    spec = command_spec("allocates", argv, root)
    return {
        "probe": spec.name,
        "case_id": "command",
        "root": str(root),
        "device": "cpu",
        "dtype": "float32",
        "seed": 0,
        "source": spec.to_json(),
        "timeout_s": 60,
    }


def test_the_oom_killers_sigkill_is_out_of_memory_outright(small_cgroup: Path, tmp_path: Path) -> None:
    greedy = {
        "probe": "exit_test_greedy",
        "case_id": "only",
        "root": str(tmp_path),
        "device": "cpu",
        "dtype": "float32",
        "seed": 0,
    }
    python = [sys.executable, "-c", ALLOCATE]
    in_a_shell = ["sh", "-c", f"{shlex.join(python)}; exit $?"]
    jobs = [greedy, command_job(python, tmp_path), command_job(in_a_shell, tmp_path)]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join((str(PROJECT_ROOT), str(Path(__file__).parent))),
        "REGTRACK_HOME": str(tmp_path / "home"),
    }
    driver = subprocess.run(
        [
            sys.executable,
            "-c",
            DRIVER,
            str(small_cgroup / "cgroup.procs"),
            json.dumps(jobs),
            str(tmp_path / "worker.log"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert driver.returncode == 0, driver.stderr
    assert json.loads(driver.stdout) == [
        ["error", "out of memory: worker killed by SIGKILL (the kernel's OOM killer)"],
        ["error", "out of memory: command killed by SIGKILL (the kernel's OOM killer)"],
        ["error", "out of memory: a process of the command (exit 137) killed by SIGKILL (the kernel's OOM killer)"],
    ]
