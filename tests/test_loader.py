"""A revision's package is imported from its snapshot and nowhere else, even in an editable install."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gitrepo import GitRepo

from probes.loader import load_backend, purge
from tracker.demo.bugs import read_tree, write_tree
from tracker.demo.history import backend_root

PROJECT_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def without_metadata(tmp_path: Path) -> Path:
    files = {path: data for path, data in read_tree(backend_root()).items() if path != "backend/metadata.py"}
    root = tmp_path / "revision"
    write_tree(files, root)
    return root


def test_this_install_would_serve_backend_modules_from_the_project() -> None:
    """The hazard the loader guards against: outside the project, ``backend.metadata`` still
    resolves to this checkout (the editable install's finder, or PYTHONPATH)."""
    code = "import importlib.util; print(importlib.util.find_spec('backend.metadata').origin)"
    found = subprocess.run([sys.executable, "-c", code], cwd="/", capture_output=True, text=True, check=True).stdout
    assert Path(found.strip()) == PROJECT_ROOT / "backend" / "metadata.py"


def test_a_module_the_revision_lacks_does_not_exist(without_metadata: Path) -> None:
    with pytest.raises(ModuleNotFoundError, match="backend.metadata"):
        load_backend(without_metadata)
    purge()


def test_lazy_imports_while_a_probe_runs_come_from_the_revision(without_metadata: Path, tmp_path: Path) -> None:
    (without_metadata / "backend" / "metadata.py").write_bytes(read_tree(backend_root())["backend/metadata.py"])
    backend = load_backend(without_metadata)
    try:
        assert Path(backend.__file__).parent == without_metadata / "backend"
        assert Path(importlib.import_module("backend.kernels.base").__file__).is_relative_to(without_metadata)
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module("backend.not_in_this_revision")
    finally:
        purge()
    assert importlib.util.find_spec("backend.metadata").origin == str(PROJECT_ROOT / "backend" / "metadata.py")


def test_regtrack_run_calls_such_a_revision_untestable(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "repo")
    write_tree(read_tree(backend_root()), repo.path)
    repo.commit("backend")
    repo.commit("rm metadata", {"backend/metadata.py": None})
    env = {**os.environ, "REGTRACK_HOME": str(tmp_path / "home")}
    env.pop("REGTRACK_DB_URL", None)
    result = subprocess.run(
        [sys.executable, "-m", "tracker.cli", "run", "--repo", str(repo.path), "--probe", "target_verify_metadata", "HEAD", "--json"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    (row,) = json.loads(result.stdout)
    assert row["verdict"] == "skip", row
    assert "import error: ModuleNotFoundError" in row["signature"]
