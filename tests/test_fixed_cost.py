"""What a command that finds everything stored costs: no worker started; neither torch, alembic nor
GitPython imported. A CPU worker's environment is predicted in the parent, and checked against
each worker that does start before it runs anything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gitrepo import GitRepo

from probes.sources import command_spec, resolve
from tracker.core.errors import UsageError
from tracker.execution.executors import LocalExecutor
from tracker.execution.protocol import Job

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# Runs the CLI like ``python -m tracker.cli`` and says afterwards what the process had imported.
WRAPPER = """
import json, runpy, sys
sys.argv = ["regtrack", *sys.argv[2:]]
try:
    runpy.run_module("tracker.cli", run_name="__main__")
except SystemExit as exit:
    code = exit.code
with open(REPORT, "w") as out:
    json.dump({"code": code, **{name: name in sys.modules for name in ("torch", "alembic", "git")}}, out)
"""


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    repo = GitRepo(tmp_path / "work")
    for i in range(8):
        repo.commit(f"Change {i}", {"value.txt": f"{i}\n", "check.sh": "test $(cat value.txt) -lt 5\n"})
    return repo


def cli(tmp_path: Path, *args: str) -> dict:
    report = tmp_path / "imports.json"
    code = WRAPPER.replace("REPORT", repr(str(report)))
    env = {**os.environ, "REGTRACK_HOME": str(tmp_path / "home"), "PYTHONPATH": str(PROJECT_ROOT)}
    env.pop("REGTRACK_DB_URL", None)
    subprocess.run([sys.executable, "-c", code, "regtrack", *args], cwd=tmp_path, env=env, capture_output=True, check=False)
    return json.loads(report.read_text())


def worker_logs(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "home").rglob("worker-*.log"))


def test_a_command_bisect_that_finds_everything_stored_starts_no_worker_and_imports_no_torch_or_alembic(repo: GitRepo, tmp_path: Path) -> None:
    args = ("bisect", "--repo", str(repo.path), "--command", "sh check.sh", "--good", "HEAD~7", "--bad", "HEAD")
    assert cli(tmp_path, *args) == {"code": 1, "torch": False, "alembic": True, "git": False}, "the first opening migrates"
    started = worker_logs(tmp_path)
    assert started
    assert cli(tmp_path, *args) == {"code": 1, "torch": False, "alembic": False, "git": False}
    assert worker_logs(tmp_path) == started, "a worker was started to run nothing"


def test_a_worker_whose_environment_differs_from_the_prediction_runs_nothing(repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A torch distribution only this process sees: the worker reports the real one."""
    fake = tmp_path / "only-here"
    (fake / "torch-0.0.1.dist-info").mkdir(parents=True)
    (fake / "torch-0.0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 0.0.1\n")
    monkeypatch.syspath_prepend(str(fake))
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    spec = command_spec("check", ["sh", "-c", "touch ran; exit 0"], repo.path)
    with LocalExecutor(log_dir=tmp_path / "logs") as executor:
        predicted = executor.environment()
        assert predicted.torch == "0.0.1"
        job = Job("check", "command", str(tmp_path), "cpu", "float32", 0, source=spec.to_json(), code_hash=resolve(spec).code_hash, timeout_s=30)
        with pytest.raises(UsageError, match=r"the probe worker reports another environment .* than regtrack"):
            executor.run_many([job])
    assert not (tmp_path / "ran").exists()
