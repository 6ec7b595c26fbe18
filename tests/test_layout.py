"""The layout of DESIGN §2: imports run one way (cli -> API -> search | perf | targets | execution |
report -> db -> core), the pure search and slowdown core know nothing of git, SQL or torch,
nothing but the demo's probes imports the demo backend, each class is declared once, and no
module or function grows past its bound."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections import defaultdict
from functools import cache
from pathlib import Path

import click
from gitrepo import GitRepo

from tracker.cli.app import COMMANDS, main

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("tracker", "db", "probes", "backend")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80

# What each layer may import from the project besides itself: only what lies below it. Within the middle
# layer the arrows run one way too: execution runs probes in the snapshots targets make, and the report
# renders what the pure search words; search, targets and the report never import execution.
ALLOWED = {
    "core": set(),
    "db": {"core"},
    "backend": set(),
    "probes": {"core", "backend"},
    "search": {"core"},
    "perf": {"core"},
    "targets": {"core", "db", "probes"},
    "execution": {"core", "db", "probes", "targets"},
    "report": {"core", "db", "search", "perf"},
    "api": {"core", "db", "probes", "search", "perf", "targets", "execution", "report"},
    "demo": {"core", "db", "probes", "search", "perf", "targets", "execution", "report", "api"},
    "cli": {"core", "db", "probes", "search", "perf", "targets", "execution", "report", "api", "demo"},
}
FOREIGN_TO_SEARCH = {"git", "sqlalchemy", "torch", "subprocess"}


@cache
def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" not in path.parts:
                found[".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")] = path
    return found


@cache
def tree_of(module: str) -> ast.Module:
    return ast.parse(modules()[module].read_text())


def imports_of(module: str) -> set[str]:
    """Every module named by an import, at any depth in the file."""
    names = set()
    for node in ast.walk(tree_of(module)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def layer(module: str) -> str:
    top, _, rest = module.partition(".")
    if top != "tracker":
        return top
    package = rest.split(".")[0]
    if package in {"cli", "core", "search", "perf", "targets", "execution", "report", "demo"}:
        return package
    return "core" if not rest else "api"


def test_imports_run_one_way() -> None:
    wrong = []
    for module in sorted(modules()):
        own = layer(module)
        for name in sorted(imports_of(module)):
            if name.split(".")[0] in PACKAGES and layer(name) != own and layer(name) not in ALLOWED[own]:
                wrong.append(f"{module} ({own}) imports {name} ({layer(name)})")
    assert not wrong, "\n".join(wrong)


def test_the_search_and_the_slowdown_core_know_nothing_of_git_sql_or_torch() -> None:
    wrong = [
        f"{module} imports {name}"
        for module in sorted(modules())
        if layer(module) in ("search", "perf")
        for name in sorted(imports_of(module))
        if name.split(".")[0] in FOREIGN_TO_SEARCH
    ]
    assert not wrong, "\n".join(wrong)


def test_only_the_demo_probes_import_the_demo_backend() -> None:
    wrong = [
        module
        for module in sorted(modules())
        if layer(module) != "backend"
        and not module.startswith("probes.demo_backend")
        and any(name.split(".")[0] == "backend" for name in imports_of(module))
    ]
    assert not wrong, f"import the demo backend: {wrong}"


def test_each_class_is_declared_once() -> None:
    places = defaultdict(list)
    for module in sorted(modules()):
        for node in tree_of(module).body:
            if isinstance(node, ast.ClassDef):
                places[node.name].append(module)
    twice = {name: where for name, where in places.items() if len(where) > 1}
    assert not twice, f"declared more than once: {twice}"


def test_no_module_over_its_bound() -> None:
    lines = {module: len(path.read_text().splitlines()) for module, path in modules().items()}
    over = {module: count for module, count in sorted(lines.items()) if count > MAX_MODULE_LINES}
    assert not over, f"over {MAX_MODULE_LINES} lines: {over}"


def test_no_function_over_its_bound() -> None:
    over = []
    for module in sorted(modules()):
        for node in ast.walk(tree_of(module)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    over.append(f"{module}.{node.name}: {length} lines")
    assert not over, "\n".join(over)


def test_every_lazily_declared_command_loads() -> None:
    """The group lists every command of ``COMMANDS`` and loads each from its ``module:attribute``."""
    ctx = click.Context(main)
    assert main.list_commands(ctx) == sorted(COMMANDS)
    for name, path in COMMANDS.items():
        command = main.get_command(ctx, name)
        assert isinstance(command, click.Command) and command.name == name, path


def test_a_query_command_does_not_import_the_probing_module(tmp_path: Path) -> None:
    """A query runs without loading the commands that run probes, nor their API."""
    repo = GitRepo(tmp_path / "repo")
    repo.commit("Add a file", {"file.txt": "1\n"})
    code = (
        "import sys\n"
        "from tracker.cli.app import main\n"
        "try:\n"
        f"    main(['regressions', '--repo', {str(repo.path)!r}])\n"
        "except SystemExit as done:\n"
        "    print(done.code, 'tracker.cli.probing' in sys.modules, 'tracker.probing' in sys.modules)\n"
    )
    env = {**os.environ, "REGTRACK_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)}
    env.pop("REGTRACK_DB_URL", None)
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert result.stdout.splitlines()[-1] == "0 False False", result.stdout + result.stderr
