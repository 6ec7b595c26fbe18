"""Every wrong ``probes`` entry of a target, and every wrong ``--command``: one line saying what is
wrong and how to mend it, exit 2, nothing run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from gitrepo import GitRepo

from tracker.cli.app import main
from tracker.targets.config import load_config

PROBE_FILE = (
    "from probes import ProbeResult\n\nLIMIT = 3\n\n\ndef verify(ctx, params):\n    return ProbeResult.passed()\n"
)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GitRepo:
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)
    repo = GitRepo(tmp_path / "work")
    files = {"check.sh": "exit 0\n", "ci/probes.py": PROBE_FILE, "ci/empty.py": "", "ci/raises.py": "1 / 0\n"}
    repo.commit("Initial", files)
    return repo


def regtrack(repo: GitRepo, config: str, *args: str) -> Result:
    (repo.path / "regtrack.toml").write_text(f'[targets.t]\nrepo = "."\n{config}')
    old = Path.cwd()
    os.chdir(repo.path)
    try:
        return CliRunner().invoke(main, list(args or ("run", "HEAD")), catch_exceptions=False)
    finally:
        os.chdir(old)


def assert_one_line_error(result: Result, *fragments: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("regtrack: error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


TABLE = "[targets.t.probes.p]\n"


@pytest.mark.parametrize(
    ("config", "fragments"),
    [
        (
            TABLE + 'command = "sh check.sh"\ncmd = "x"\n',
            [
                "unknown key targets.t.probes.p.cmd; known keys here: "
                "module, command, inputs, reads, version, metrics, repeat"
            ],
        ),
        (
            TABLE + 'command = "sh check.sh"\nmodule = "ci/probes.py:verify"\n',
            ["targets.t.probes.p has both module and command"],
        ),
        (
            TABLE,
            [
                "targets.t.probes.p has neither module nor command and no probe is called 'p'",
                "target_verify_metadata",
                'set module = "FILE.py:ATTR" or command = [...]',
            ],
        ),
        (TABLE + 'inputs = ["check.sh"]\n', ["targets.t.probes.p sets inputs without module or command"]),
        (
            TABLE + "command = 3\n",
            [
                "targets.t.probes.p.command must be a command line:",
                'a list of strings such as ["sh", "check.sh"], or one string',
            ],
        ),
        (TABLE + 'command = ["sh", 1]\n', ["targets.t.probes.p.command must be a command line"]),
        (TABLE + "command = []\n", ["targets.t.probes.p.command is empty; name the program to run"]),
        (TABLE + 'command = "  "\n', ["targets.t.probes.p.command is empty"]),
        (
            TABLE + 'command = "sh \'check.sh"\n',
            [
                "targets.t.probes.p.command cannot be split like a shell would",
                "(No closing quotation); balance its quotes",
            ],
        ),
        (
            TABLE + "module = 3\n",
            [
                'targets.t.probes.p.module must be "FILE.py[:ATTR]"',
                '(relative to the repository) or "package.module[:ATTR]"',
            ],
        ),
        (TABLE + 'module = "ci/probes.py:not-a-name"\n', ["targets.t.probes.p.module must be"]),
        (
            TABLE + 'module = "ci/nope.py:verify"\n',
            ["targets.t.probes.p.module names 'ci/nope.py', which is not a file in"],
        ),
        (
            TABLE + 'module = "/etc/probes.py"\n',
            ["targets.t.probes.p.module names '/etc/probes.py', which is not a path inside the repository"],
        ),
        (
            TABLE + 'command = "sh check.sh"\ninputs = ["nope.sh"]\n',
            ["targets.t.probes.p.inputs names 'nope.sh', which is not a file in"],
        ),
        (
            TABLE + 'command = "sh check.sh"\ninputs = ["../check.sh"]\n',
            ["targets.t.probes.p.inputs names '../check.sh', which is not a path inside the repository"],
        ),
        (
            TABLE + 'command = "sh check.sh"\ninputs = "check.sh"\n',
            ['targets.t.probes.p.inputs must be a list of file paths such as ["ci/check.sh"]'],
        ),
        (TABLE + 'command = "sh check.sh"\nversion = "2"\n', ["targets.t.probes.p.version must be a positive integer"]),
        (TABLE + 'command = "sh check.sh"\nversion = 0\n', ["targets.t.probes.p.version must be a positive integer"]),
        (
            TABLE + 'command = "sh check.sh"\nversion = true\n',
            ["targets.t.probes.p.version must be a positive integer"],
        ),
        (
            TABLE + 'command = "sh check.sh"\nmetrics = [{ name = "us", unit = "us", direction = "sideways" }]\n',
            ['targets.t.probes.p.metrics.direction must be "lower" or "higher" (is better)'],
        ),
        (TABLE + 'command = "sh check.sh"\nmetrics = []\n', ["targets.t.probes.p.metrics must be a non-empty list"]),
        (
            TABLE + 'command = "sh check.sh"\nmetrics = [{ name = "us" }]\n',
            ['targets.t.probes.p.metrics.unit must name the unit, such as "us"'],
        ),
        (
            TABLE + 'command = "sh check.sh"\nmetrics = [{ name = "us", unit = "us" }, { name = "us", unit = "ms" }]\n',
            ["targets.t.probes.p.metrics declares us more than once; keep one of each"],
        ),
        (
            TABLE + 'command = "sh check.sh"\nmetrics = [{ name = "us", unit = "us" }]\nrepeat = 0\n',
            ["targets.t.probes.p.repeat must be a whole number of samples from 1 to 10000"],
        ),
        (
            TABLE + 'command = "sh check.sh"\nrepeat = 5\n',
            ["targets.t.probes.p.repeat counts samples of metrics; declare metrics = [...] or leave it out"],
        ),
        (
            TABLE + 'module = "ci/probes.py:verify"\nrepeat = 5\n',
            ["targets.t.probes.p declares metrics for a module probe; its Probe declares them"],
        ),
        (
            '[targets.t.probes]\np = "sh check.sh"\n',
            ["targets.t.probes.p must be a table; write it as [targets.t.probes.p]"],
        ),
        (
            'probes = "check"\n',
            ["targets.t.probes must be a list of probe names or a table of [targets.t.probes.NAME] tables"],
        ),
        ('probes = ["check", 2]\n', ["targets.t.probes must be a list of probe names"]),
        ("probes = []\n", ["targets.t.probes is empty"]),
        ("[targets.t.probes]\n", ["targets.t.probes is empty; add a [targets.t.probes.NAME] table"]),
        (
            'probes = ["check"]\n',
            ["targets.t.probes names unknown probe 'check'; known probes: target_verify_metadata"],
        ),
    ],
)
def test_a_wrong_probe_entry_is_one_line_and_exit_2(repo: GitRepo, config: str, fragments: list[str]) -> None:
    result = regtrack(repo, config)
    assert_one_line_error(result, "regtrack.toml: ", *fragments)
    assert not (repo.path.parent / "home").exists(), "nothing is opened, let alone run"


@pytest.mark.parametrize(
    ("module", "fragment"),
    [
        (
            "no_such_probe_module:verify",
            "probe 'p': cannot import probe module 'no_such_probe_module': ModuleNotFoundError",
        ),
        (
            "ci/probes.py:absent",
            "probe 'p': ci/probes.py:absent names nothing, not a Probe or a check function; point it at one",
        ),
        ("ci/probes.py:LIMIT", "probe 'p': ci/probes.py:LIMIT names int, not a Probe or a check function"),
        (
            "ci/empty.py",
            "probe 'p': ci/empty.py registers no probe called 'p'; register one or name it ci/empty.py:ATTR",
        ),
        ("ci/raises.py:verify", "does not load: ZeroDivisionError: division by zero"),
    ],
)
def test_a_module_that_does_not_give_a_probe_is_one_line_and_exit_2(repo: GitRepo, module: str, fragment: str) -> None:
    assert_one_line_error(regtrack(repo, f'{TABLE}module = "{module}"\n'), fragment)


def test_an_unknown_probe_on_the_command_line_lists_the_configured_ones_first(repo: GitRepo) -> None:
    result = regtrack(repo, TABLE + 'command = "sh check.sh"\n', "run", "--probe", "q", "HEAD")
    assert_one_line_error(result, "unknown probe 'q'; known probes: p, target_verify_metadata")


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (
            ("bisect", "--good", "HEAD", "--bad", "HEAD", "--command", "sh check.sh", "--probe", "p"),
            "give --probe or --command, not both",
        ),
        (("run", "--command", "sh check.sh", "--probe", "p", "HEAD"), "give --probe or --command, not both"),
        (("run", "--command", "", "HEAD"), "--command is empty; give the command to run, as for git bisect run"),
        (
            ("run", "--command", "sh 'check.sh", "HEAD"),
            "--command cannot be split like a shell would (No closing quotation); balance its quotes",
        ),
        (("bisect", "--resume", "--command", "sh check.sh"), "no unfinished bisect of probe 'command:"),
    ],
)
def test_a_wrong_command_option_is_one_line_and_exit_2(repo: GitRepo, args: tuple[str, ...], fragment: str) -> None:
    assert_one_line_error(regtrack(repo, TABLE + 'command = "sh check.sh"\n', *args), fragment)


def test_a_table_of_probes_keeps_its_order_and_resolves_paths_against_the_repository(
    repo: GitRepo, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "regtrack.toml").write_text(
        f"[targets.t]\nrepo = {str(repo.path)!r}\n"
        '[targets.t.probes.z]\ncommand = "sh check.sh"\ninputs = ["check.sh"]\nversion = 4\n'
        '[targets.t.probes.a]\nmodule = "ci/probes.py:verify"\n'
        "[targets.t.probes.target_verify_metadata]\n"
    )
    target = load_config(elsewhere).target("t")
    assert target.probes == ("z", "a", "target_verify_metadata")
    assert set(target.probe_specs) == {"z", "a"}
    assert target.probe_specs["z"].command == ("sh", "check.sh") and target.probe_specs["z"].version == 4
    assert target.probe_specs["z"].argv() == ["sh", str(repo.path / "check.sh")]
    assert target.probe_specs["a"].base == str(repo.path)


SHAPES = '''\
from probes import Case, Probe, ProbeResult, register
from tracker.core.verdicts import Outcome


def check(ctx, params):
    """Whether n is even."""
    return ProbeResult.passed() if params.get("n", 0) % 2 == 0 else ProbeResult(Outcome.FAIL, signature="odd")


EVEN = Probe("called_otherwise", 7, "n is even", (Case("two", {"n": 2}), Case("three", {"n": 3})), check)
register(Probe("{registered}", 2, "registered on import", (Case("one", {}),), check))
'''


def test_a_module_source_gives_a_probe_object_a_function_or_what_it_registers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from probes.sources import ProbeSpec, Source, resolve

    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "shapes.py").write_text(SHAPES.replace("{registered}", "shapes_registered"))
    (tmp_path / "mylib_ci_shapes.py").write_text(SHAPES.replace("{registered}", "importable_registered"))
    monkeypatch.syspath_prepend(str(tmp_path))

    def module(name: str, where: str, version: int | None = None):
        return resolve(ProbeSpec(name, Source.MODULE, module=where, base=str(tmp_path), version=version))

    probe = module("even", "ci/shapes.py:EVEN")
    assert (probe.name, probe.version, [case.id for case in probe.cases]) == ("even", 7, ["two", "three"])
    assert module("even", "ci/shapes.py:EVEN", version=9).version == 9
    function = module("even_fn", "ci/shapes.py:check")
    assert (function.version, function.description, [case.id for case in function.cases]) == (
        1,
        "Whether n is even.",
        ["default"],
    )
    assert module("shapes_registered", "ci/shapes.py").version == 2
    imported = module("imported", "mylib_ci_shapes:EVEN")
    assert imported.version == 7 and imported.code_hash != probe.code_hash  # the module's own file, not the other
    assert module("importable_registered", "mylib_ci_shapes").cases[0].id == "one"
    assert probe.code_hash == module("even", "ci/shapes.py:EVEN").code_hash
    (tmp_path / "ci" / "shapes.py").write_text(SHAPES.replace("{registered}", "shapes_registered") + "# edited\n")
    assert module("even", "ci/shapes.py:EVEN").code_hash != probe.code_hash
    edited = SHAPES.replace("{registered}", "importable_registered").replace('"n is even"', '"n is even, edited"')
    (tmp_path / "mylib_ci_shapes.py").write_text(edited)
    again = module("imported", "mylib_ci_shapes:EVEN")
    assert (again.description, again.code_hash != imported.code_hash) == ("n is even, edited", True)
