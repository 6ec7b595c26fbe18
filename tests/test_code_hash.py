"""A probe's code hash covers the modules of its package that the check imports, however it
imports them, and nothing else (and, for a check named by place, the cases): a real package
written to a temporary folder and imported."""

from __future__ import annotations

import importlib
import itertools
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from probes.api import Case, Probe
from probes.code_hash import module_closure, module_closure_hash

_names = itertools.count()

PROBE = """\
import json

from probes import ProbeResult
from {pkg}.helpers import judge
from . import relative


def check(ctx, params):
    from {pkg}.deep.inner import limit
    import {pkg}.later
    return ProbeResult.passed(value=float(judge(limit)))
"""
FILES = {
    "__init__.py": "",
    "helpers.py": "def judge(x):\n    return x\n",
    "relative.py": "SCALE = 1\n",
    "deep/__init__.py": "",
    "deep/inner.py": "limit = 3\n",
    "unused.py": "NOTHING = 0\n",
}


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path]]:
    """A fresh package (its own name, so no earlier import is reused) and its folder."""
    name = f"hashed_probes_{next(_names)}"
    root = tmp_path / name
    for relative, text in {**FILES, "probe.py": PROBE.format(pkg=name)}.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield name, root
    for module in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
        del sys.modules[module]


def probe_module(name: str):
    return importlib.import_module(f"{name}.probe")


def test_the_closure_holds_every_module_of_the_package_the_check_imports(package: tuple[str, Path]) -> None:
    name, _ = package
    found = set(module_closure(probe_module(name)))
    expected = {f"{name}.{m}" for m in ("probe", "helpers", "relative", "deep", "deep.inner")} | {name}
    assert found == expected


@pytest.mark.parametrize("edited", ["probe.py", "helpers.py", "relative.py", "deep/inner.py", "deep/__init__.py"])
def test_editing_any_module_the_check_imports_changes_the_hash(package: tuple[str, Path], edited: str) -> None:
    name, root = package
    module = probe_module(name)
    before = module_closure_hash(module)
    (root / edited).write_text((root / edited).read_text() + "# edited\n")
    assert module_closure_hash(module) != before


def test_a_module_the_check_does_not_import_leaves_the_hash_alone(package: tuple[str, Path]) -> None:
    name, root = package
    module = probe_module(name)
    before = module_closure_hash(module)
    (root / "unused.py").write_text("NOTHING = 1\n")
    assert module_closure_hash(module) == before


def test_a_module_that_appears_where_the_check_imports_it_changes_the_hash(package: tuple[str, Path]) -> None:
    name, root = package
    module = probe_module(name)
    before = module_closure_hash(module)
    (root / "later.py").write_text("READY = True\n")
    importlib.invalidate_caches()
    assert f"{name}.later" in module_closure(module)
    assert module_closure_hash(module) != before


def test_a_registered_probe_hash_follows_its_helpers(package: tuple[str, Path]) -> None:
    name, root = package
    probe = Probe("hashed", 1, "a probe with helpers", (Case("default", {}),), probe_module(name).check)
    before = probe.code_hash
    (root / "helpers.py").write_text("def judge(x):\n    return x + 1\n")
    assert probe.code_hash != before


def test_a_check_named_by_place_is_hashed_from_its_files_with_its_cases(package: tuple[str, Path]) -> None:
    name, root = package
    probe = Probe("placed", 1, "a check named by place", (Case("default", {"n": 1}),), f"{name}.probe:check")
    before = probe.code_hash
    assert f"{name}.probe" not in sys.modules, "hashing does not import the check"
    assert replace(probe, cases=(Case("default", {"n": 2}),)).code_hash != before
    (root / "deep" / "inner.py").write_text("limit = 4\n")
    assert probe.code_hash != before
    assert probe.load_check() is probe_module(name).check


def test_a_helper_that_does_not_parse_is_hashed_by_its_bytes(package: tuple[str, Path]) -> None:
    name, root = package
    module = probe_module(name)
    before = module_closure_hash(module)
    (root / "helpers.py").write_text("def judge(x:\n")
    broken = module_closure_hash(module)
    assert broken != before
    (root / "helpers.py").write_text("def judge(x:\n  # still broken\n")
    assert module_closure_hash(module) != broken
