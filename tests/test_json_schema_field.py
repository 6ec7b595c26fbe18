"""Every ``--json`` output of regtrack is one object whose ``schema`` key, first, is
``JSON_SCHEMA_VERSION``: each command's answer and its errors alike, so a program that reads them
can tell which shape it reads."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from cli_in import regtrack
from gitrepo import GitRepo

from tracker.cli.app import COMMANDS, main
from tracker.core.json_schema import JSON_SCHEMA_VERSION

COMMITS = 6
CULPRIT = 4
"""The first commit whose value.txt makes the check fail."""

CHECK = ("--command", "./check.sh")

INVOCATIONS: dict[str, tuple[str, ...]] = {
    "run": ("run", "HEAD", *CHECK),
    "history": ("history",),
    "show": ("show", "HEAD"),
    "regressions": ("regressions",),
    "report": ("report",),
    "scan": ("scan", "HEAD~5..HEAD", *CHECK),
    "bisect": ("bisect", "--good", "HEAD~5", "--bad", "HEAD", *CHECK),
    "track": ("track", *CHECK),
    "compare": ("compare", "HEAD~5", "HEAD", *CHECK),
    "gc": ("gc",),
}
"""One cheap invocation of each command that prints JSON, on the repository of ``measured``."""

CHECKED_ELSEWHERE = {"demo": "tests/test_demo.py reads the schema of the demo it builds anyway"}

ERRORS: dict[str, tuple[str, ...]] = {
    "unknown revision": ("run", "no-such-revision", *CHECK),
    "bad option value": ("run", "HEAD", "--device", "tpu", *CHECK),
    "filter naming nothing stored": ("history", "--probe", "no-such-probe"),
}


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GitRepo]:
    """A repository whose untracked check fails from commit CULPRIT on, scanned once."""
    root = tmp_path_factory.mktemp("json_schema")
    repo = GitRepo(root / "work")
    for i in range(COMMITS):
        repo.commit(f"value {i}", {"value.txt": f"{i}\n"})
    (repo.path / ".git" / "info" / "exclude").write_text("check.sh\n")
    (repo.path / "check.sh").write_text(f'test "$(cat value.txt)" -lt {CULPRIT}\n')
    (repo.path / "check.sh").chmod(0o755)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("REGTRACK_HOME", str(root / "home"))
        patch.delenv("REGTRACK_DB_URL", raising=False)
        scanned = regtrack(*INVOCATIONS["scan"], cwd=repo.path)
        assert scanned.exit_code == 1, scanned.output
        yield repo


@pytest.fixture
def home(measured: GitRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REGTRACK_HOME", str(measured.path.parent / "home"))
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)


def printed_object(args: tuple[str, ...], cwd: Path) -> tuple[dict, int]:
    result = regtrack(*args, "--json", cwd=cwd)
    printed = json.loads(result.stdout)
    assert isinstance(printed, dict), f"{args[0]} --json printed {type(printed).__name__}, not one object"
    return printed, result.exit_code


@pytest.mark.usefixtures("home")
@pytest.mark.parametrize("command", sorted(INVOCATIONS))
def test_each_commands_json_carries_the_schema_version_first(measured: GitRepo, command: str) -> None:
    printed, exit_code = printed_object(INVOCATIONS[command], measured.path)
    assert exit_code in (0, 1), printed
    assert next(iter(printed)) == "schema" and printed["schema"] == JSON_SCHEMA_VERSION, printed
    assert "error" not in printed, printed


@pytest.mark.usefixtures("home")
@pytest.mark.parametrize("case", sorted(ERRORS))
def test_an_error_asked_for_as_json_carries_the_schema_version(measured: GitRepo, case: str) -> None:
    printed, exit_code = printed_object(ERRORS[case], measured.path)
    assert exit_code == 2
    assert (printed["schema"], printed["exit_code"]) == (JSON_SCHEMA_VERSION, 2) and printed["error"], printed


def test_every_command_with_a_json_option_is_checked_here_or_named_elsewhere() -> None:
    context = click.Context(main)
    with_json = {
        name
        for name in COMMANDS
        if isinstance(command := main.get_command(context, name), click.Command)
        and any("--json" in option.opts for option in command.params)
    }
    assert with_json == set(INVOCATIONS) | set(CHECKED_ELSEWHERE)
