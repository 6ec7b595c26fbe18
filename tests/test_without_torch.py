"""regtrack installed without torch: a ``--command`` bisect runs as usual, and a probe that needs
torch is refused on one line, exit 2, saying how to install it. Real subprocesses (the CLI and the
workers it starts) whose Python cannot import torch: a ``sitecustomize`` refuses it."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from gitrepo import GitRepo

PROJECT_ROOT = Path(__file__).resolve().parent.parent
NO_TORCH = """\
import importlib.abc
import sys


class NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname.partition(".")[0] == "torch":
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


sys.meta_path.insert(0, NoTorch())
"""
CHECK = "import sys\nsys.exit(open('value').read().strip() != 'good')\n"
INSTALL_LINE = (
    "regtrack: error: probe {name!r} needs torch, which is not installed; "
    "pip install torch (CPU: pip install torch==2.13.0)\n"
)


@pytest.fixture
def without_torch(tmp_path: Path) -> dict[str, str]:
    """The environment of a Python that cannot import torch, with a store of its own."""
    site = tmp_path / "no-torch"
    site.mkdir()
    (site / "sitecustomize.py").write_text(NO_TORCH)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), str(PROJECT_ROOT)]),
        "REGTRACK_HOME": str(tmp_path / "home"),
    }
    env.pop("REGTRACK_DB_URL", None)
    return env


@pytest.fixture
def repo(tmp_path: Path) -> tuple[GitRepo, list[str]]:
    """Eight commits whose ``value`` turns bad at the fifth."""
    repo = GitRepo(tmp_path / "repo")
    shas = [repo.commit(f"commit {i}", {"check.py": CHECK, "value": "good" if i < 4 else "bad"}) for i in range(8)]
    return repo, shas


def regtrack(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tracker.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_this_python_cannot_import_torch(without_torch: dict[str, str], tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import torch"], env=without_torch, cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 1 and "No module named 'torch'" in done.stderr


def test_a_command_bisect_names_the_culprit_without_torch(
    without_torch: dict[str, str], repo: tuple[GitRepo, list[str]]
) -> None:
    git_repo, shas = repo
    command = f"{shlex.quote(sys.executable)} check.py"
    done = regtrack(
        without_torch, git_repo.path, "bisect", "--command", command, "--good", shas[0], "--bad", shas[-1], "--json"
    )
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["culprit"] == shas[4]


@pytest.mark.parametrize("probe", ["target_verify_attention", "sglang_trtllm_mha_target_verify"])
@pytest.mark.parametrize("command", ["run", "bisect"])
def test_a_torch_probe_is_refused_on_one_line_saying_how_to_install_torch(
    without_torch: dict[str, str], repo: tuple[GitRepo, list[str]], probe: str, command: str
) -> None:
    git_repo, shas = repo
    revisions = [shas[-1]] if command == "run" else ["--good", shas[0], "--bad", shas[-1]]
    done = regtrack(without_torch, git_repo.path, command, "--probe", probe, *revisions)
    assert (done.returncode, done.stderr, done.stdout) == (2, INSTALL_LINE.format(name=probe), "")
