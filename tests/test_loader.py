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

from probes import Case, Probe, ProbeContext, run_case
from probes.loader import load_backend, load_package, purge, revision
from tracker.core.verdicts import Outcome
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
        [
            sys.executable,
            "-m",
            "tracker.cli",
            "run",
            "--repo",
            str(repo.path),
            "--probe",
            "target_verify_metadata",
            "HEAD",
            "--json",
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    (row,) = json.loads(result.stdout)["rows"]
    assert row["verdict"] == "skip", row
    assert "import error: ModuleNotFoundError" in row["signature"]


def package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.fixture
def installed_mylib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of ``mylib`` on sys.path, with a submodule no revision has, as an installed one would be."""
    site = package(tmp_path / "site", {"mylib/__init__.py": "WHERE = 'installed'\n", "mylib/extra.py": "X = 1\n"})
    monkeypatch.syspath_prepend(str(site))
    return site


def test_any_package_comes_from_its_import_roots_and_nowhere_else(tmp_path: Path, installed_mylib: Path) -> None:
    root = package(
        tmp_path / "rev",
        {"src/mylib/__init__.py": "WHERE = 'revision'\nfrom mylib import core\n", "src/mylib/core.py": "N = 1\n"},
    )
    try:
        with revision([root / "src"]):
            mylib = load_package("mylib", [root / "src"])
            assert (mylib.WHERE, mylib.core.N) == ("revision", 1)
            assert load_package("mylib", [root / "src"]) is mylib, "one case imports a package once"
            with pytest.raises(ModuleNotFoundError, match="'mylib.extra' in the revision"):
                importlib.import_module("mylib.extra")
        assert "mylib" not in sys.modules and str((root / "src").resolve()) not in sys.path
        assert importlib.import_module("mylib").WHERE == "installed"
    finally:
        sys.modules.pop("mylib", None)


def test_a_package_the_revision_lacks_is_not_found(tmp_path: Path, installed_mylib: Path) -> None:
    root = package(tmp_path / "rev", {"src/other/__init__.py": ""})
    with revision([root / "src"]), pytest.raises(ModuleNotFoundError, match="No module named 'mylib' in the revision"):
        load_package("mylib", [root / "src"])


def test_each_revision_reads_its_sibling_modules_fresh(tmp_path: Path) -> None:
    """A module a package imports from its import root by plain ``import`` belongs to the revision too."""
    for value in (1, 2):
        root = package(
            tmp_path / f"rev{value}",
            {"lib/mylib/__init__.py": "import helper\n", "lib/helper.py": f"VALUE = {value}\n"},
        )
        with revision([root / "lib"]):
            assert load_package("mylib", [root / "lib"]).helper.VALUE == value
        assert "helper" not in sys.modules


def test_forgetting_a_revision_at_the_project_root_keeps_the_projects_own_modules() -> None:
    import probes.api

    with revision([PROJECT_ROOT]):
        load_package("backend", [PROJECT_ROOT])
    assert sys.modules["probes.api"] is probes.api and "backend" not in sys.modules


def test_a_context_imports_from_its_roots_and_calls_an_import_failure_untestable(tmp_path: Path) -> None:
    root = package(tmp_path / "rev", {"py/mylib/__init__.py": "VALUE = (\n"})
    probe = Probe(
        "loader_test", 1, "imports mylib", (Case("only", {}),), lambda ctx, params: ctx.import_package("mylib")
    )
    result = run_case(probe, probe.cases[0], ProbeContext(root, import_roots=("py",)))
    assert (result.outcome, result.signature) == (Outcome.ERROR, "import error: SyntaxError")
    assert "mylib" not in sys.modules
