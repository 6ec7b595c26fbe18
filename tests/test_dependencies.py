"""What regtrack imports is declared in pyproject.toml, and CI's constraints.txt pins each declared
distribution at a version its lower bound admits."""

from __future__ import annotations

import ast
import sys
import tomllib
from collections.abc import Iterator
from importlib.metadata import packages_distributions
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
OURS = ("tracker", "probes", "db", "backend")
NOT_IN_CI = ("gpu", "bench")
"""Extras CI does not install (a GPU build, the strategy benchmarks' anchor): nothing pins them."""
TORCH = Version("2.13.0")
"""The torch CI and the README install first, outside constraints.txt."""


def requirements(*, in_ci: bool) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    chosen = [name for name in extras if not (in_ci and name in NOT_IN_CI)]
    lines = [*project["dependencies"], *(line for name in chosen for line in extras[name])]
    return [Requirement(line) for line in lines]


def pinned() -> dict[str, Version]:
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    pins = (line.split("==") for line in lines if line and not line.startswith("#"))
    return {canonicalize_name(name): Version(version) for name, version in pins}


def imported_modules() -> Iterator[str]:
    """The top-level name of every absolute import in regtrack's packages."""
    for package in OURS:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    yield from (alias.name.partition(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    yield node.module.partition(".")[0]


def test_constraints_pin_every_distribution_ci_installs_within_its_bounds() -> None:
    pins = pinned()
    for requirement in requirements(in_ci=True):
        name = canonicalize_name(requirement.name)
        version = TORCH if name == "torch" else pins.get(name)
        assert version is not None, f"{requirement.name} is declared but not pinned in constraints.txt"
        assert requirement.specifier.contains(version, prereleases=True), f"{requirement} excludes {version}"


def test_every_installed_distribution_the_code_imports_is_declared() -> None:
    declared = {canonicalize_name(requirement.name) for requirement in requirements(in_ci=False)}
    installed = packages_distributions()
    foreign = set(imported_modules()) - set(sys.stdlib_module_names) - set(OURS)
    undeclared = {
        module: names
        for module in sorted(foreign)
        if (names := {canonicalize_name(name) for name in installed.get(module, [])}) and not names & declared
    }
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"
