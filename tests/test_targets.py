"""Targets that say how a revision becomes testable: import roots, setup, env, timeout, facts.

Each test builds a real repository holding ``mylib`` (a package not called ``backend``) under
``src/`` and runs the real CLI on it, with the probes of ``target_probes`` (registered through
REGTRACK_PROBE_MODULES, in this process and in the workers).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from gitrepo import GitRepo
from hypothesis import given
from hypothesis import strategies as st

from db.store import Store
from tracker.cli.app import main
from tracker.core.verdicts import Outcome
from tracker.execution.client import WorkerClient
from tracker.execution.executors import DEFAULT_TIMEOUT_S, LocalExecutor
from tracker.execution.protocol import Job
from tracker.targets.reuse import settings_key
from tracker.targets.revisions import Repo
from tracker.targets.setup import Setup, SetupFailed
from tracker.targets.snapshots import SnapshotCache, modified_file

TESTS = Path(__file__).resolve().parent
PROJECT_ROOT = TESTS.parent
PROBE_ENV = {"REGTRACK_PROBE_MODULES": "target_probes", "PYTHONPATH": str(TESTS)}

BUILD = """\
import os, sys
from pathlib import Path
with open(os.environ["SETUP_COUNTER"], "a") as counter:
    counter.write(os.getcwd() + "\\n")
print("compiling mylib")
if Path("tools/FAIL").exists():
    print("compiler exploded", file=sys.stderr)
    sys.exit(1)
Path("src/mylib/_built.py").write_text("BUILT = 1\\n")
"""


def mylib(value: int, broken: bool = False) -> dict[str, str | None]:
    return {"src/mylib/__init__.py": f"VALUE = {value}\nBROKEN = {broken}\n"}


def toml_list(words: list[str]) -> str:
    return json.dumps(words)


def mylib_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A store of its own, and the test probes (``target_probes``) known here and in the workers."""
    home = tmp_path / "home"
    monkeypatch.setenv("REGTRACK_HOME", str(home))
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)
    for name, value in PROBE_ENV.items():
        monkeypatch.setenv(name, value)
    return home


def mylib_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GitRepo:
    """An empty repository to commit ``mylib`` revisions to, the working directory."""
    repo = GitRepo(tmp_path / "lib")
    monkeypatch.chdir(repo.path)
    return repo


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return mylib_store(tmp_path, monkeypatch)


@pytest.fixture
def repo(tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> GitRepo:
    return mylib_repo(tmp_path, monkeypatch)


def write_config(repo: GitRepo, **keys: str) -> None:
    lines = ["[targets.lib]", 'repo = "."', *(f"{key} = {value}" for key, value in keys.items())]
    (repo.path / "regtrack.toml").write_text("\n".join(lines) + "\n")


def regtrack(*args: str) -> Result:
    return CliRunner().invoke(main, [*args, "--json"], catch_exceptions=False)


def run_json(*args: str) -> list[dict[str, Any]]:
    result = regtrack("run", *args)
    assert result.exit_code in (0, 1, 3), result.output
    rows: list[dict[str, Any]] = json.loads(result.stdout)["rows"]
    return rows


def test_a_package_not_called_backend_is_imported_from_its_import_root(repo: GitRepo, tmp_path: Path) -> None:
    """Good, bad and untestable revisions of ``src/mylib``; an installed copy of mylib (on the
    workers' PYTHONPATH) is never served in its place, even where the revision has none."""
    installed = tmp_path / "site" / "mylib"
    installed.mkdir(parents=True)
    (installed / "__init__.py").write_text("VALUE = 99\nBROKEN = False\n")
    write_config(
        repo,
        paths='["src"]',
        import_roots='["src"]',
        env=f'{{ TARGET_FLAG = "on", PYTHONPATH = "{installed.parent}" }}',
    )
    (repo.path / "regtrack.toml").write_text(
        (repo.path / "regtrack.toml").read_text() + '[targets.flat]\nrepo = "."\npaths = ["src"]\n'
        f'env = {{ PYTHONPATH = "{installed.parent}" }}\n'
    )
    good = repo.commit("mylib", mylib(3))
    bad = repo.commit("break mylib", mylib(3, broken=True))
    broken = repo.commit("half an edit", {"src/mylib/__init__.py": "VALUE = (\n"})

    rows = {row["sha"]: row for row in run_json(good, bad, broken, "--target", "lib", "--probe", "mylib_value")}
    assert [rows[sha]["verdict"] for sha in (good, bad, broken)] == ["good", "bad", "skip"]
    assert rows[good]["metrics"]["value"] == 30.0
    assert rows[good]["metrics"]["flag"] == 1.0
    assert rows[bad]["signature"] == "mylib is broken"
    assert rows[broken]["signature"] == "import error: SyntaxError"

    (flat,) = run_json(good, "--target", "flat", "--probe", "mylib_value")
    assert (flat["verdict"], flat["signature"]) == ("skip", "import error: ModuleNotFoundError")


def test_setup_runs_once_per_tree_and_a_failing_one_makes_the_revision_untestable(repo: GitRepo, home: Path) -> None:
    counter = repo.path.parent / "setup-runs"
    setup = [sys.executable, "tools/build.py"]
    write_config(
        repo,
        paths='["src", "tools"]',
        import_roots='["src"]',
        setup=toml_list(setup),
        env=f'{{ SETUP_COUNTER = "{counter}" }}',
    )
    first = repo.commit("mylib", {**mylib(1), "tools/build.py": BUILD})
    same_tree = repo.commit("docs", {"README": "mylib\n"})
    changed = repo.commit("mylib 2", mylib(2))
    failing = repo.commit("build breaks", {"tools/FAIL": ""})

    def setups() -> list[str]:
        return counter.read_text().splitlines() if counter.exists() else []

    (row,) = run_json(first, "--probe", "mylib_value")
    assert row["verdict"] == "good" and (row["metrics"]["built"], row["metrics"]["sealed"]) == (1.0, 1.0)
    assert len(setups()) == 1, "two cases of one tree share one setup"
    assert Path(setups()[0]).parent == home / "cache" / "snapshots" and Path(setups()[0]).name.startswith(".tmp-")

    (row,) = run_json(same_tree, "--probe", "mylib_built")
    assert (row["verdict"], row["reused"]) == ("good", False)
    assert len(setups()) == 1, "another revision with the same tree reuses the built snapshot"

    (row,) = run_json(changed, "--probe", "mylib_value")
    assert row["verdict"] == "good" and len(setups()) == 2

    result = regtrack("run", failing, "--probe", "mylib_value")
    assert result.exit_code != 1, result.output
    (row,) = json.loads(result.stdout)["rows"]
    assert (row["verdict"], row["signature"]) == ("skip", "setup failed: compiler exploded")
    assert set(row["cases"].values()) == {"error"} and len(setups()) == 3
    (log,) = [log for log in (home / "cache" / "snapshots" / ".setup").glob("*.log") if "exploded" in log.read_text()]
    assert "compiling mylib" in log.read_text()

    (row,) = run_json(first, "--probe", "mylib_value")
    assert row["reused"] and len(setups()) == 3
    write_config(
        repo,
        paths='["src", "tools"]',
        import_roots='["src"]',
        setup=toml_list([*setup, "--again"]),
        env=f'{{ SETUP_COUNTER = "{counter}" }}',
    )
    (row,) = run_json(first, "--probe", "mylib_value")
    assert not row["reused"] and len(setups()) == 4, "another setup command is a fresh run"
    write_config(
        repo,
        paths='["src", "tools"]',
        import_roots='["src", "tools"]',
        setup=toml_list([*setup, "--again"]),
        env=f'{{ SETUP_COUNTER = "{counter}" }}',
    )
    (row,) = run_json(first, "--probe", "mylib_value")
    assert not row["reused"] and len(setups()) == 4, "other import roots are a fresh run of the same snapshot"


def test_the_targets_timeout_stands_unless_timeout_is_given(repo: GitRepo) -> None:
    write_config(repo, paths='["src"]', import_roots='["src"]', timeout="0.5")
    first = repo.commit("mylib", mylib(1))
    second = repo.commit("mylib 2", mylib(2))
    result = regtrack("run", first, "--probe", "mylib_slow")
    assert result.exit_code == 1, result.output
    (row,) = json.loads(result.stdout)["rows"]
    assert (row["verdict"], row["signature"]) == ("bad", "timed out after 0.5s")
    (row,) = run_json(second, "--probe", "mylib_slow", "--timeout", "60")
    assert row["verdict"] == "good"


def test_case_timeout_prefers_the_command_line_then_the_target(tmp_path: Path) -> None:
    assert LocalExecutor(log_dir=tmp_path).case_timeout() == DEFAULT_TIMEOUT_S
    assert LocalExecutor(log_dir=tmp_path).case_timeout(5.0) == 5.0
    assert LocalExecutor(log_dir=tmp_path, timeout_s=7.0).case_timeout(5.0) == 7.0


def test_facts_are_part_of_the_environment_fingerprint(repo: GitRepo) -> None:
    write_config(repo, paths='["src"]', import_roots='["src"]', facts='{ cluster = "a" }')
    sha = repo.commit("mylib", mylib(1))
    assert not run_json(sha, "--probe", "mylib_built")[0]["reused"]
    assert run_json(sha, "--probe", "mylib_built")[0]["reused"]
    write_config(repo, paths='["src"]', import_roots='["src"]', facts='{ cluster = "b" }')
    assert not run_json(sha, "--probe", "mylib_built")[0]["reused"], "other facts, another environment"
    with Store.open() as store:
        environments = store.environments(store.repository(repo.path.resolve()))
    assert [env.facts for _, env in environments] == [{"cluster": "a"}, {"cluster": "b"}]
    assert len({fingerprint for fingerprint, _ in environments}) == 2


NO_TORCH_RUN = """
import json, sys
from tracker.cli import main
try:
    main(sys.argv[1:])
except SystemExit as done:
    code = done.code
print(json.dumps({"exit": code, "parent_torch": "torch" in sys.modules}))
"""

WORKER_TORCH_COMMAND = """
import json, os
maps = open(f"/proc/{os.getppid()}/maps").read()
json.dump({"metrics": {"worker_torch": float("libtorch" in maps)}}, open(os.environ["REGTRACK_METRICS"], "w"))
"""


def run_without_torch(repo: GitRepo, home: Path, *args: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``regtrack run ARGS --json`` in a fresh interpreter: its exit code and whether the parent
    imported torch, and the rows it printed."""
    env = {
        **os.environ,
        **PROBE_ENV,
        "REGTRACK_HOME": str(home),
        "PYTHONPATH": os.pathsep.join([str(PROJECT_ROOT), str(TESTS)]),
    }
    done = subprocess.run(
        [sys.executable, "-c", NO_TORCH_RUN, "run", *args, "--json"],
        cwd=repo.path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    *printed, last = done.stdout.strip().splitlines()
    return json.loads(last), json.loads("\n".join(printed))["rows"]


def test_a_target_without_torch_probes_never_imports_torch(repo: GitRepo, home: Path) -> None:
    write_config(repo, paths='["src"]', import_roots='["src"]')
    sha = repo.commit("mylib", mylib(1))
    status, rows = run_without_torch(repo, home, sha, "--probe", "mylib_value")
    assert status == {"exit": 0, "parent_torch": False}
    assert rows[0]["verdict"] == "good" and rows[0]["metrics"]["torch_loaded"] == 0.0


def test_a_command_only_target_never_imports_torch(repo: GitRepo, home: Path) -> None:
    sha = repo.commit("mylib", {**mylib(1), "src/check.py": WORKER_TORCH_COMMAND})
    (repo.path / "regtrack.toml").write_text(
        '[targets.lib]\nrepo = "."\npaths = ["src"]\n'
        f"[targets.lib.probes.check]\ncommand = {toml_list([sys.executable, 'src/check.py'])}\n"
    )
    status, rows = run_without_torch(repo, home, sha)
    assert status == {"exit": 0, "parent_torch": False}, rows
    assert rows[0]["verdict"] == "good" and rows[0]["metrics"]["worker_torch"] == 0.0


def test_the_torch_check_can_see_torch(tmp_path: Path) -> None:
    """The command above would notice a worker that loaded torch."""
    code = (
        f"import torch, subprocess, sys; subprocess.run([sys.executable, '-c', {WORKER_TORCH_COMMAND!r}], check=True)"
    )
    metrics = tmp_path / "metrics.json"
    subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, "REGTRACK_METRICS": str(metrics)}, check=True, timeout=120
    )
    assert json.loads(metrics.read_text()) == {"metrics": {"worker_torch": 1.0}}


def test_a_worker_restarts_for_a_job_with_other_variables(tmp_path: Path) -> None:
    root = tmp_path / "snapshot"
    (root / "src" / "mylib").mkdir(parents=True)
    (root / "src" / "mylib" / "__init__.py").write_text("")
    (root / "src" / "mylib" / "_built.py").write_text("BUILT = 1\n")

    def job(env: dict[str, str]) -> Job:
        return Job("mylib_built", "only", str(root), "cpu", "float32", 0, import_roots=("src",), env=env)

    with WorkerClient(tmp_path / "worker.log", PROBE_ENV) as client:
        off = client.run(job({}), timeout_s=60)
        first = client.pid
        on = client.run(job({"TARGET_FLAG": "on"}), timeout_s=60)
        second = client.pid
        again = client.run(job({"TARGET_FLAG": "on"}), timeout_s=60)
        assert (off.metrics["flag"], on.metrics["flag"], again.metrics["flag"]) == (0.0, 1.0, 1.0)
        assert first != second and client.pid == second
        assert off.outcome is Outcome.PASS


@pytest.fixture
def built_repo(tmp_path: Path) -> tuple[Repo, str, Path]:
    git = GitRepo(tmp_path / "built")
    sha = git.commit("mylib", {**mylib(1), "tools/build.py": BUILD})
    return Repo(git.path), sha, tmp_path / "setup-runs"


def test_a_setup_snapshot_is_sealed_with_its_outputs_in_the_manifest(
    built_repo: tuple[Repo, str, Path], tmp_path: Path
) -> None:
    repo, sha, counter = built_repo
    cache = SnapshotCache(tmp_path / "cache")
    setup = Setup((sys.executable, "tools/build.py"), {"SETUP_COUNTER": str(counter)})
    plain = cache.materialise(repo, sha, ["src", "tools"])
    built = cache.materialise(repo, sha, ["src", "tools"], setup)
    assert plain != built and not (plain / "src" / "mylib" / "_built.py").exists()
    output = built / "src" / "mylib" / "_built.py"
    assert output.read_text() == "BUILT = 1\n" and not output.stat().st_mode & 0o222
    assert modified_file(built) is None and "compiling mylib" in cache.setup_log(built).read_text()
    os.chmod(output, 0o644)
    output.write_text("BUILT = 0\n")
    assert modified_file(built) == "src/mylib/_built.py"
    assert cache.materialise(repo, sha, ["src", "tools"], setup) == built and output.read_text() == "BUILT = 1\n"
    assert len(counter.read_text().splitlines()) == 2, "a snapshot a probe edited is built again"


def test_concurrent_materialisations_run_one_setup(built_repo: tuple[Repo, str, Path], tmp_path: Path) -> None:
    repo, sha, counter = built_repo
    setup = Setup((sys.executable, "tools/build.py"), {"SETUP_COUNTER": str(counter)})
    roots: list[Path] = []
    start = threading.Barrier(4)

    def materialise() -> None:
        start.wait()
        roots.append(SnapshotCache(tmp_path / "cache").materialise(repo, sha, ["src", "tools"], setup))

    threads = [threading.Thread(target=materialise) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(roots)) == 1 and len(roots) == 4
    assert len(counter.read_text().splitlines()) == 1


def test_a_setup_that_cannot_start_is_a_setup_failure(built_repo: tuple[Repo, str, Path], tmp_path: Path) -> None:
    repo, sha, _ = built_repo
    cache = SnapshotCache(tmp_path / "cache")
    with pytest.raises(SetupFailed) as failed:
        cache.materialise(repo, sha, ["src"], Setup(("no-such-build-tool", "all")))
    assert failed.value.signature == "setup failed: cannot run 'no-such-build-tool': No such file or directory"
    assert cache.snapshots() == []


ROOTS = st.lists(st.sampled_from(["src", "python", "lib/py", "."]), min_size=1, max_size=3, unique=True).map(tuple)
SETUPS = st.none() | st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=3).map(tuple)


def test_the_defaults_leave_the_settings_key_as_it_was() -> None:
    """Results stored before setups and import roots existed stay reusable by a target without them."""
    legacy = "033a994054411576-44136fa355b3678a"  # settings_key("float32", None, {}) before either existed
    assert settings_key("float32", None, {}) == legacy
    assert settings_key("float32", None, {}, None, (".",)) == legacy


@given(setup=SETUPS, roots=ROOTS, other_setup=SETUPS, other_roots=ROOTS)
def test_the_settings_key_changes_exactly_with_setup_and_import_roots(
    setup: tuple[str, ...] | None,
    roots: tuple[str, ...],
    other_setup: tuple[str, ...] | None,
    other_roots: tuple[str, ...],
) -> None:
    key = settings_key("float32", None, {"scale": 1}, setup, roots)
    assert settings_key("float32", None, {"scale": 1}, setup, roots) == key
    same = (setup, roots) == (other_setup, other_roots)
    assert (settings_key("float32", None, {"scale": 1}, other_setup, other_roots) == key) == same
    assert settings_key("bfloat16", None, {"scale": 1}, setup, roots) != key
