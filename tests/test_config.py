"""Config discovery and validation on real directories and repositories."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from gitrepo import GitRepo

from probes.registry import all_probes
from tracker.cli.app import main
from tracker.core.errors import UsageError
from tracker.targets.config import Config, ExecutorConfig, Target, TargetTable, load_config, normalise_paths
from tracker.targets.probe_tables import ProbeTable

ALL_PROBES = tuple(probe.name for probe in all_probes())


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    repo = GitRepo(tmp_path / "work")
    repo.commit("Initial", {"backend/__init__.py": "", "engine/server.py": "PORT = 1\n"})
    return repo


def usage_error(start: Path, repo_override: Path | None = None) -> str:
    with pytest.raises(UsageError) as caught:
        load_config(start, repo_override)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_no_config_is_one_default_target_at_the_git_top_level_with_no_probes(repo: GitRepo) -> None:
    """The whole repository and no probe: a command must say what to run (--command or --probe)."""
    (repo.path / "engine" / "deep").mkdir()
    config = load_config(repo.path / "engine" / "deep", None)
    assert config.db_url is None
    assert config.source is None
    target = config.target(None)
    assert target == Target("default", repo.path.resolve(), (".",), (), "main")
    assert config.target("default") is target


def test_loading_a_config_names_the_builtin_probes_without_importing_torch(repo: GitRepo, tmp_path: Path) -> None:
    """Every command loads the config; the query commands should not pay for torch to do it."""
    checked = tmp_path / "checked"
    checked.mkdir()
    (checked / "regtrack.toml").write_text(
        f'[targets.default]\nrepo = {str(repo.path)!r}\nprobes = ["swa_page_table"]\n'
    )
    code = (
        "import sys; from pathlib import Path; from tracker.targets.config import load_config; "
        f"default = load_config(Path({str(repo.path)!r}), None).target(None); "
        f"listed = load_config(Path({str(checked)!r}), None).target(None); "
        "print(len(default.probes), listed.probes, 'torch' in sys.modules)"
    )
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["0", "('swa_page_table',)", "False"]


def test_no_config_with_repo_override(repo: GitRepo, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert load_config(elsewhere, repo.path).target(None).repo == repo.path.resolve()


def test_no_config_outside_any_repository(tmp_path: Path) -> None:
    message = usage_error(tmp_path)
    assert str(tmp_path) in message
    assert "--repo PATH" in message


def test_regtrack_toml_found_from_a_subdirectory(repo: GitRepo) -> None:
    (repo.path / "regtrack.toml").write_text(
        'db_url = "sqlite:///x.db"\n'
        "[targets.backend]\n"
        'repo = "."\n'
        'paths = ["./backend/", "engine"]\n'
        'probes = ["target_verify_metadata"]\n'
        'branch = "trunk"\n'
    )
    config = load_config(repo.path / "engine", None)
    assert config.source == (repo.path / "regtrack.toml").resolve()
    assert config.db_url == "sqlite:///x.db"
    assert config.target(None) == Target(
        "backend", repo.path.resolve(), ("backend", "engine"), ("target_verify_metadata",), "trunk"
    )


def test_tool_regtrack_in_pyproject(repo: GitRepo, tmp_path: Path) -> None:
    other = GitRepo(tmp_path / "other")
    (repo.path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.regtrack.targets.kernels]\nrepo = "../other"\n'
    )
    config = load_config(repo.path / "backend", None)
    assert config.source == (repo.path / "pyproject.toml").resolve()
    target = config.target("kernels")
    assert target.repo == other.path.resolve()
    assert target.paths == (".",)
    assert target.probes == ()


def test_pyproject_without_the_section_is_passed_over(repo: GitRepo) -> None:
    (repo.path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert load_config(repo.path, None).source is None


def test_regtrack_toml_wins_over_pyproject_and_the_nearest_directory_wins(repo: GitRepo, tmp_path: Path) -> None:
    (repo.path / "pyproject.toml").write_text('[tool.regtrack.targets.outer]\nrepo = "."\n')
    (repo.path / "regtrack.toml").write_text('[targets.top]\nrepo = "."\n')
    assert set(load_config(repo.path, None).targets) == {"top"}
    (repo.path / "engine" / "regtrack.toml").write_text('[targets.inner]\nrepo = ".."\n')
    config = load_config(repo.path / "engine", None)
    assert set(config.targets) == {"inner"}
    assert config.target(None).repo == repo.path.resolve()


def test_search_stops_at_the_git_top_level(repo: GitRepo, tmp_path: Path) -> None:
    (tmp_path / "regtrack.toml").write_text('[targets.outside]\nrepo = "work"\n')
    assert load_config(repo.path, None).source is None
    assert load_config(tmp_path, None).source == (tmp_path / "regtrack.toml").resolve()


def test_repo_override_reads_that_repositorys_config_never_the_current_directorys(
    repo: GitRepo, tmp_path: Path
) -> None:
    other = GitRepo(tmp_path / "other")
    (repo.path / "regtrack.toml").write_text('[targets.here]\nrepo = "."\nprobes = ["swa_page_table"]\n')
    no_config = load_config(repo.path, other.path)
    assert no_config.source is None and no_config.target(None) == Target("default", other.path.resolve())
    (other.path / "regtrack.toml").write_text('[targets.a]\nrepo = "."\n[targets.b]\npaths = ["src"]\n')
    config = load_config(repo.path, other.path)
    assert config.source == (other.path / "regtrack.toml").resolve()
    assert {target.repo for target in config.targets.values()} == {other.path.resolve()}
    assert config.target("b").paths == ("src",)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[targets.a\nrepo = '.'\n", "is not valid TOML"),
        ('colour = "red"\n[targets.a]\nrepo = "."\n', "unknown key colour"),
        ('[targets.a]\nrepo = "."\nprobe = ["x"]\n', "unknown key targets.a.probe"),
        (
            '[targets.a]\nrepo = "."\nprobes = ["no_such_probe"]\n',
            "targets.a.probes names unknown probe 'no_such_probe'",
        ),
        ('[targets.a]\nrepo = "."\nprobes = []\n', "targets.a.probes is empty"),
        ('[targets.a]\nrepo = "."\npaths = "backend"\n', "targets.a.paths must be a list of strings"),
        ('[targets.a]\nrepo = "."\npaths = ["../up"]\n', "targets.a.paths '../up' is not a path inside"),
        ('[targets.a]\nrepo = "."\npaths = []\n', "targets.a.paths needs at least one path"),
        ("[targets.a]\nrepo = 3\n", "targets.a.repo must be a path string"),
        ('[targets.a]\nbranch = "main"\n', "targets.a.repo is missing"),
        ('[targets.a]\nrepo = "."\nbranch = 1\n', "targets.a.branch must be a branch name"),
        ('db_url = 5\n[targets.a]\nrepo = "."\n', "db_url must be a string"),
        ('db_url = "sqlite://"\n', "targets is missing"),
        ("targets = 3\n", "targets is missing"),
        ("targets = {a = 1}\n", "targets.a must be a table"),
        ('executor = "ray"\n[targets.a]\nrepo = "."\n', "executor must be a table"),
        (
            '[executor]\nkind = "slurm"\n[targets.a]\nrepo = "."\n',
            "executor.kind must be one of local, ray, not 'slurm'",
        ),
        ('[executor]\nkind = "ray"\nadress = "auto"\n[targets.a]\nrepo = "."\n', "unknown key executor.adress"),
        ('[executor]\nray_address = 1\n[targets.a]\nrepo = "."\n', "executor.ray_address must be a string"),
        (
            '[executor]\ngpus_per_actor = 2\n[targets.a]\nrepo = "."\n',
            "executor.gpus_per_actor must be a number from 0 to 1",
        ),
    ],
)
def test_bad_regtrack_toml(repo: GitRepo, text: str, expected: str) -> None:
    file = repo.path / "regtrack.toml"
    file.write_text(text)
    message = usage_error(repo.path / "engine")
    assert message.startswith(str(file.resolve()))
    assert expected in message


WRONG_TYPE = [
    *((f"[targets.a]\n{key} = 1979-05-27\n", f"targets.a.{key} ") for key in TargetTable.__struct_fields__),
    *(
        (f'[executor]\n{key} = 1979-05-27\n[targets.a]\nrepo = "."\n', f"executor.{key} ")
        for key in ExecutorConfig.__struct_fields__
    ),
    *(
        (f'[targets.a]\nrepo = "."\n[targets.a.probes.p]\n{key} = 1979-05-27\n', f"targets.a.probes.p.{key} ")
        for key in ProbeTable.__struct_fields__
    ),
]


@pytest.mark.parametrize(("text", "key"), WRONG_TYPE, ids=[key for _, key in WRONG_TYPE])
def test_every_key_of_every_table_names_itself_when_its_value_has_the_wrong_type(
    repo: GitRepo, text: str, key: str
) -> None:
    (repo.path / "regtrack.toml").write_text(text)
    message = usage_error(repo.path)
    assert message.startswith(f"{(repo.path / 'regtrack.toml').resolve()}: {key}"), message
    assert " must be " in message or " is missing" in message, message


def test_the_keys_that_make_a_revision_testable(repo: GitRepo) -> None:
    (repo.path / "pyproject.toml").write_text(
        "[tool.regtrack.targets.sgl]\n"
        'repo = "."\n'
        'paths = ["python/sglang", "sgl-kernel"]\n'
        'import_roots = ["python", "./python/", "sgl-kernel/python"]\n'
        "setup = \"make -C sgl-kernel 'build all'\"\n"
        'env = { SGLANG_FLAG = "1", CUDA_HOME = "/usr/local/cuda" }\n'
        "timeout = 900\n"
        'facts = { cluster = "h200-pool" }\n'
    )
    target = load_config(repo.path, None).target(None)
    assert target.import_roots == ("python", "sgl-kernel/python")
    assert target.setup == ("make", "-C", "sgl-kernel", "build all")
    assert dict(target.env) == {"SGLANG_FLAG": "1", "CUDA_HOME": "/usr/local/cuda"}
    assert (target.timeout_s, dict(target.facts)) == (900.0, {"cluster": "h200-pool"})
    assert load_config(repo.path, None).target(None) == target
    listed = '[targets.a]\nrepo = "."\nsetup = ["python", "build.py", "--in place"]\ntimeout = 0.5\n'
    (repo.path / "regtrack.toml").write_text(listed)
    target = load_config(repo.path, None).target(None)
    assert (target.setup, target.timeout_s, target.import_roots, target.env, target.facts) == (
        ("python", "build.py", "--in place"),
        0.5,
        (".",),
        {},
        {},
    )


PREPARATION_ERRORS = [
    ('import_roots = "src"', "targets.a.import_roots must be a list of strings"),
    ("import_roots = []", "targets.a.import_roots is empty"),
    ('import_roots = ["../up"]', "targets.a.import_roots '../up' is not a path inside the repository"),
    ('import_roots = ["/abs"]', "targets.a.import_roots '/abs' is not a path inside the repository"),
    (
        'paths = ["backend"]\nimport_roots = ["src"]',
        "targets.a.import_roots 'src' is outside the target's paths (backend); add it to paths",
    ),
    ("setup = 3", "targets.a.setup must be a command line"),
    ('setup = ["make", 1]', "targets.a.setup must be a command line"),
    ('setup = ""', "targets.a.setup is empty"),
    ("setup = []", "targets.a.setup is empty"),
    ('setup = "make \'all"', "targets.a.setup cannot be split like a shell would (No closing quotation)"),
    ('env = "A=1"', "targets.a.env must be a table of strings"),
    ("env = { A = 1 }", "targets.a.env.A must be a string"),
    ('env = { "A=B" = "1" }', "targets.a.env.A=B cannot be an environment variable"),
    ('env = { A = "x\\u0000y" }', "targets.a.env.A cannot be an environment variable"),
    ("timeout = 0", "targets.a.timeout must be a number of seconds above 0"),
    ("timeout = -5", "targets.a.timeout must be a number of seconds above 0"),
    ('timeout = "60"', "targets.a.timeout must be a number of seconds above 0"),
    ("timeout = true", "targets.a.timeout must be a number of seconds above 0"),
    ("timeout = inf", "targets.a.timeout must be a number of seconds above 0"),
    ("timeout = nan", "targets.a.timeout must be a number of seconds above 0"),
    ('facts = ["gpu"]', "targets.a.facts must be a table of strings"),
    ("facts = { gpus = 8 }", "targets.a.facts.gpus must be a string"),
]


@pytest.mark.parametrize(("line", "expected"), PREPARATION_ERRORS, ids=[line for line, _ in PREPARATION_ERRORS])
def test_bad_preparation_keys_are_one_line_and_exit_2(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str, expected: str
) -> None:
    file = repo.path / "regtrack.toml"
    file.write_text(f'[targets.a]\nrepo = "."\n{line}\n')
    message = usage_error(repo.path)
    assert message.startswith(f"{file.resolve()}: {expected}"), message
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)
    monkeypatch.chdir(repo.path)
    result = CliRunner().invoke(main, ["history"], catch_exceptions=False)
    assert (result.exit_code, result.stderr) == (2, f"regtrack: error: {message}\n")


def test_unknown_probe_lists_the_known_ones(repo: GitRepo) -> None:
    (repo.path / "regtrack.toml").write_text('[targets.a]\nrepo = "."\nprobes = ["target_verify_metadata", "nope"]\n')
    message = usage_error(repo.path)
    assert "'nope'" in message
    assert all(name in message for name in ALL_PROBES)


def test_bad_pyproject_section_names_the_full_key(repo: GitRepo) -> None:
    file = repo.path / "pyproject.toml"
    file.write_text('[tool.regtrack]\n[tool.regtrack.targets.a]\nrepo = "."\nextra = 1\n')
    message = usage_error(repo.path)
    assert message.startswith(str(file.resolve()))
    assert "unknown key tool.regtrack.targets.a.extra" in message


def test_malformed_pyproject_is_reported(repo: GitRepo) -> None:
    (repo.path / "pyproject.toml").write_text("[project\n")
    message = usage_error(repo.path)
    assert "pyproject.toml is not valid TOML" in message
    assert "line 1" in message


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("regtrack.toml", '[targets.a]\nrepo = "."\n# caf\xe9 latin-1\n'),
        ("pyproject.toml", '[project]\nname = "caf\xe9"\n[tool.regtrack.targets.a]\nrepo = "."\n'),
    ],
)
def test_a_config_that_is_not_utf8_is_a_usage_error(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, text: str
) -> None:
    file = repo.path / name
    file.write_bytes(text.encode("latin-1"))
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)
    monkeypatch.chdir(repo.path / "engine")
    result = CliRunner().invoke(main, ["history"], catch_exceptions=False)
    assert result.exit_code == 2, result.output
    line = text.count("\n", 0, text.index("\xe9")) + 1
    assert result.stderr == (
        f"regtrack: error: {file.resolve()} is not UTF-8 text (byte 0xe9 on line {line}); save it as UTF-8\n"
    )


def test_choosing_a_target(tmp_path: Path) -> None:
    one = Target("x", tmp_path)
    two = Target("y", tmp_path)
    assert Config({"x": one}, None).target(None) is one
    assert Config({"x": one, "default": two}, None).target(None) is two
    several = Config({"x": one, "y": two}, None, source=tmp_path / "regtrack.toml")
    with pytest.raises(UsageError, match=r"defines several targets \(x, y\); pick one with --target NAME"):
        several.target(None)
    with pytest.raises(UsageError, match=r"unknown target 'z' in .*regtrack.toml; known targets: x, y"):
        several.target("z")


def test_normalise_paths() -> None:
    assert normalise_paths(["./backend/", "docs", "backend", "."]) == (".", "backend", "docs")
    for bad in (["/abs"], ["a/../.."], [""], []):
        with pytest.raises(ValueError):
            normalise_paths(bad)


def test_the_executor_table(repo: GitRepo) -> None:
    (repo.path / "regtrack.toml").write_text(
        '[executor]\nkind = "ray"\nray_address = "auto"\ngpus_per_actor = 0.5\n[targets.a]\nrepo = "."\n'
    )
    executor = load_config(repo.path, None).executor
    assert (executor.kind, executor.ray_address, executor.gpus_per_actor) == ("ray", "auto", 0.5)
    (repo.path / "regtrack.toml").write_text('[targets.a]\nrepo = "."\n')
    assert load_config(repo.path, None).executor.kind == "local"


def test_a_ray_address_with_the_local_executor_is_a_usage_error(repo: GitRepo) -> None:
    result = CliRunner().invoke(
        main, ["run", "--repo", str(repo.path), "--executor", "local", "--ray-address", "auto", "HEAD"]
    )
    assert result.exit_code == 2
    assert "--ray-address names a Ray cluster" in result.output
