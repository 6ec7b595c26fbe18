"""The layout shows the architecture: imports run one way (cli -> API -> search | targets |
execution | report -> db -> core), the pure search knows nothing of git, SQL or torch, and no
module grows past 400 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("tracker", "db", "probes")
API = {
    "tracker.workspace", "tracker.measure", "tracker.bisect_session", "tracker.bisect_options", "tracker.stored_bisect",
    "tracker.scan", "tracker.track", "tracker.queries",
}
MAX_LINES = 400


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            found[name] = path
    return found


def imports_of(path: Path) -> set[str]:
    """Every module named by an import, at any depth in the file (lazy imports count too)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def layer(module: str) -> str:
    if module.startswith("tracker.cli"):
        return "cli"
    if module in API:
        return "api"
    for part in ("search", "targets", "execution", "report", "demo", "core"):
        if module.startswith(f"tracker.{part}"):
            return part
    return module.split(".")[0]


# What each layer may import from the project (besides itself).
ALLOWED = {
    "core": set(),
    "db": {"core"},
    "search": {"core"},
    "targets": {"core", "db", "probes"},
    "execution": {"core", "db", "targets", "probes"},
    "report": {"core", "db", "search", "targets", "api"},
    "probes": {"core", "backend"},
    "api": {"core", "db", "search", "targets", "execution", "report", "probes", "api"},
    "demo": {"core", "db", "search", "targets", "execution", "report", "probes", "api", "backend"},
    "cli": {"core", "db", "search", "targets", "execution", "report", "probes", "api", "demo"},
    "tracker": {"core"},
}
OURS = {"tracker", "db", "probes", "backend"}


@pytest.mark.parametrize("module", sorted(modules()))
def test_imports_run_one_way(module: str) -> None:
    own = layer(module)
    for name in imports_of(modules()[module]):
        if name.split(".")[0] not in OURS:
            continue
        other = layer(name)
        assert other == own or other in ALLOWED[own], f"{module} ({own}) imports {name} ({other})"


def test_the_search_knows_nothing_of_git_sql_or_torch() -> None:
    for module, path in modules().items():
        if layer(module) == "search":
            foreign = {name.split(".")[0] for name in imports_of(path)} & {"git", "sqlalchemy", "torch", "subprocess"}
            assert not foreign, f"{module} imports {foreign}"


def test_only_the_demo_probes_import_the_demo_backend() -> None:
    for module, path in modules().items():
        if any(name.split(".")[0] == "backend" for name in imports_of(path)):
            assert module.startswith("probes.demo_backend"), f"{module} imports backend"


@pytest.mark.parametrize("module", sorted(modules()))
def test_no_module_over_400_lines(module: str) -> None:
    lines = len(modules()[module].read_text().splitlines())
    assert lines <= MAX_LINES, f"{module} has {lines} lines"


def test_every_command_is_listed_with_the_module_that_defines_it() -> None:
    """The CLI imports a command's module only when that command is asked for (``COMMAND_MODULES``):
    a command missing from the list would be unreachable."""
    import importlib

    from tracker.cli.app import COMMAND_MODULES, main

    for module in set(COMMAND_MODULES.values()):
        importlib.import_module(f"tracker.cli.{module}")
    defined = {name: command.callback.__module__ for name, command in main.commands.items()}  # type: ignore[union-attr]
    assert defined == {name: f"tracker.cli.{module}" for name, module in COMMAND_MODULES.items()}
