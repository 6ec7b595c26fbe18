"""Probes from every source bisect a real repository that is not the demo: a small package called
``mylib`` with a planted bug, an untestable stretch and the repository's own ``check.sh``.
Real git, real SQLite, real workers; the CLI in-process or in a subprocess."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from cli_in import regtrack
from gitrepo import GitRepo, git_env

from db.store import Store
from probes.sources import command_spec, resolve
from tracker.core.errors import UsageError
from tracker.execution.client import WorkerClient
from tracker.execution.protocol import Job

PROJECT_ROOT = Path(__file__).resolve().parent.parent
GOOD = "def add(a, b):\n    {doc}\n    return a + b\n"
BUGGY = "def add(a, b):\n    {doc}\n    return a + b + (a == 2)\n"
BROKEN = "from mylib.helpers import twice  # moved in the next commit\n\n" + GOOD
CHECK_SH = """\
# the repository's own check: 0 good, 1 bad, 125 when mylib does not import
"$PYTHON" -c "import mylib" 2>/dev/null || { echo "mylib does not import"; exit 125; }
"$PYTHON" -c "import mylib, sys; print('add(2, 2) =', mylib.add(2, 2)); sys.exit(mylib.add(2, 2) != 4)"
"""
MODULE_PROBE = '''\
from probes import ProbeResult
from tracker.core.verdicts import Outcome


def verify(ctx, params):
    """add(2, 2) is 4"""
    total = ctx.import_package("mylib").add(2, 2)
    if total == 4:
        return ProbeResult.passed(total=float(total))
    return ProbeResult(Outcome.FAIL, {"total": float(total)}, signature=f"add(2, 2) == {total}")
'''


@dataclass(frozen=True)
class History:
    repo: Path
    commits: list[str]
    untestable: tuple[str, ...]
    culprit: str

    @property
    def good(self) -> str:
        return self.commits[0]

    @property
    def bad(self) -> str:
        return self.commits[-1]


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> History:
    repo = GitRepo(tmp_path_factory.mktemp("mylib") / "work")
    commits = [
        repo.commit(
            "Add mylib",
            {"mylib/__init__.py": GOOD.format(doc='"""Sum."""'), "check.sh": CHECK_SH, "ci/probes.py": MODULE_PROBE},
        )
    ]
    untestable, culprit = [], ""
    for i in range(1, 13):
        doc = f'"""Sum, revision {i}."""'
        text = BROKEN if i in (4, 5) else BUGGY if i >= 8 else GOOD
        commits.append(repo.commit(f"Change {i}", {"mylib/__init__.py": text.format(doc=doc)}))
        if i in (4, 5):
            untestable.append(commits[-1])
        if i == 8:
            culprit = commits[-1]
    return History(repo.path, commits, tuple(untestable), culprit)


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PYTHON", sys.executable)
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)
    return tmp_path / "home"


def config_dir(tmp_path: Path, history: History, probes: str) -> Path:
    """A directory outside the repository holding a regtrack.toml for it."""
    where = tmp_path / "config"
    where.mkdir(exist_ok=True)
    (where / "regtrack.toml").write_text(f'[targets.mylib]\nrepo = {str(history.repo)!r}\npaths = ["mylib"]\n{probes}')
    return where


CONFIGURED = """
[targets.mylib.probes.check]
command = ["sh", "check.sh"]
inputs = ["check.sh"]

[targets.mylib.probes.verify]
module = "ci/probes.py:verify"
"""


def bisect(history: History, cwd: Path, *options: str) -> dict:
    result = regtrack("bisect", "--good", history.good, "--bad", history.bad, "--json", *options, cwd=cwd)
    assert result.exit_code == 1, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("probe", ["check", "verify"])
def test_a_command_probe_and_a_module_probe_bisect_the_planted_bug(
    history: History, tmp_path: Path, probe: str
) -> None:
    where = config_dir(tmp_path, history, CONFIGURED)
    report = bisect(history, where, "--probe", probe)
    assert report["culprit"] == history.culprit
    assert report["executions"] > 0
    signature = "exit 1" if probe == "check" else "add(2, 2) == 5"
    assert report["culprit_result"]["signature"] == signature
    again = bisect(history, where, "--probe", probe)
    assert (again["culprit"], again["executions"]) == (history.culprit, 0)


def test_a_commit_whose_check_exits_125_is_untestable(history: History, tmp_path: Path) -> None:
    where = config_dir(tmp_path, history, CONFIGURED)
    for probe in ("check", "verify"):
        result = regtrack("run", "--probe", probe, history.untestable[0], "--json", cwd=where)
        assert result.exit_code != 1, result.output
        [row] = json.loads(result.stdout)["rows"]
        assert row["verdict"] == "skip", row
    with Store.open() as store:
        [run] = store.runs(probe="check")
    assert run.detail == "mylib does not import" and run.signature == "exit 125 (untestable)"


def test_a_bisect_over_the_untestable_stretch_skips_it(history: History, tmp_path: Path) -> None:
    """The range's middle is untestable: the search steps around it."""
    good, bad = history.commits[1], history.commits[9]
    result = regtrack(
        "bisect",
        "--good",
        good,
        "--bad",
        bad,
        "--command",
        "sh check.sh",
        "--repo",
        str(history.repo),
        "--json",
        cwd=tmp_path,
    )
    report = json.loads(result.stdout)
    assert report["culprit"] == history.culprit
    assert {step["sha"] for step in report["steps"] if step["verdict"] == "skip"} & set(history.untestable)


def git_bisect_run(history: History, work: Path, *command: str) -> str:
    clone = work / "git-bisect-clone"
    subprocess.run(["git", "clone", "--quiet", str(history.repo), str(clone)], check=True, env=git_env())
    env = {**git_env(), "PYTHON": sys.executable}
    subprocess.run(
        ["git", "bisect", "start", history.bad, history.good], cwd=clone, check=True, env=env, capture_output=True
    )
    run = subprocess.run(["git", "bisect", "run", *command], cwd=clone, env=env, capture_output=True, text=True)
    found = re.search(r"^([0-9a-f]{40}) is the first bad commit", run.stdout, re.MULTILINE)
    assert found, run.stdout + run.stderr
    return found.group(1)


def test_bisect_command_without_config_names_the_commit_git_bisect_run_names(history: History, tmp_path: Path) -> None:
    assert not list(tmp_path.glob("regtrack.toml"))
    expected = git_bisect_run(history, tmp_path, "sh", "check.sh")
    report = bisect(history, tmp_path, "--repo", str(history.repo), "--command", "sh check.sh")
    assert report["culprit"] == expected == history.culprit
    assert re.fullmatch(r"command:[0-9a-f]{8}", report["probe"])
    again = bisect(history, tmp_path, "--repo", str(history.repo), "--command", "sh  'check.sh'")
    assert (again["probe"], again["culprit"], again["executions"]) == (report["probe"], history.culprit, 0)
    other = run_json(tmp_path, "--repo", str(history.repo), "--command", "sh -e check.sh", history.culprit)
    assert other["probe"] != report["probe"] and other["reused"] is False


def test_a_killed_command_bisect_resumes_to_the_same_culprit(history: History, tmp_path: Path) -> None:
    args = ["bisect", "--repo", str(history.repo), "--command", "sh check.sh", "--json"]
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-m", "tracker.cli", *args, "--good", history.good, "--bad", history.bad],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    ran, deadline = 0, time.monotonic() + 60
    while ran < 3 and time.monotonic() < deadline and process.poll() is None:
        line = process.stderr.readline() if process.stderr else ""
        ran += line.startswith("[") and "(stored)" not in line  # a step line of a revision measured now
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert ran == 3
    resumed = regtrack(*args, "--resume", cwd=tmp_path)
    assert resumed.exit_code == 1, resumed.output
    report = json.loads(resumed.stdout)
    assert report["culprit"] == history.culprit
    assert [step["sha"] for step in report["steps"]].count(history.good) == 1


def run_json(where: Path, *args: str) -> dict:
    result = regtrack("run", *args, "--json", cwd=where)
    assert result.exit_code in (0, 1), result.output
    [row] = json.loads(result.stdout)["rows"]
    return row


def test_editing_a_command_line_or_an_input_file_runs_the_probe_afresh(history: History, tmp_path: Path) -> None:
    where = config_dir(tmp_path, history, CONFIGURED)
    assert run_json(where, "--probe", "check", "HEAD")["reused"] is False
    assert run_json(where, "--probe", "check", "HEAD")["reused"] is True
    check = history.repo / "check.sh"
    original = check.read_text()
    try:
        check.write_text(original + "# an edit of the input\n")
        assert run_json(where, "--probe", "check", "HEAD")["reused"] is False
        assert run_json(where, "--probe", "check", "HEAD")["reused"] is True
    finally:
        check.write_text(original)
    assert run_json(where, "--probe", "check", "HEAD")["reused"] is True, "the original input's results stand again"
    config_dir(tmp_path, history, CONFIGURED.replace('["sh", "check.sh"]', '["sh", "-e", "check.sh"]'))
    assert run_json(where, "--probe", "check", "HEAD")["reused"] is False


def test_editing_a_module_probe_runs_it_afresh(history: History, tmp_path: Path) -> None:
    where = config_dir(tmp_path, history, CONFIGURED)
    assert run_json(where, "--probe", "verify", "HEAD")["reused"] is False
    module = history.repo / "ci" / "probes.py"
    try:
        module.write_text(MODULE_PROBE + "# an edit\n")
        assert run_json(where, "--probe", "verify", "HEAD")["reused"] is False
    finally:
        module.write_text(MODULE_PROBE)
    assert run_json(where, "--probe", "verify", "HEAD")["reused"] is True


HELPED_PROBE = '''\
from probes import ProbeResult
from tracker.core.verdicts import Outcome


def verify(ctx, params):
    """add(2, 2) is what the helper expects"""
    from helped_probes.expect import EXPECTED

    total = ctx.import_package("mylib").add(2, 2)
    return ProbeResult.passed() if total == EXPECTED else ProbeResult(Outcome.FAIL, {"total": float(total)})
'''


def test_editing_a_helper_an_importable_probe_imports_runs_it_afresh(
    history: History, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "path" / "helped_probes"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "verify.py").write_text(HELPED_PROBE)
    helper = package / "expect.py"
    helper.write_text("EXPECTED = 4\n")
    monkeypatch.syspath_prepend(str(package.parent))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(package.parent), os.environ.get("PYTHONPATH")])))
    where = config_dir(tmp_path, history, '[targets.mylib.probes.helped]\nmodule = "helped_probes.verify:verify"\n')
    try:
        assert run_json(where, "--probe", "helped", history.good)["reused"] is False
        assert run_json(where, "--probe", "helped", history.good)["reused"] is True
        helper.write_text("EXPECTED = 4  # the same value, another file\n")
        assert run_json(where, "--probe", "helped", history.good)["reused"] is False
    finally:
        for name in [m for m in sys.modules if m.startswith("helped_probes")]:
            del sys.modules[name]


def test_run_command_measures_the_revisions(history: History, tmp_path: Path) -> None:
    result = regtrack(
        "run",
        "--repo",
        str(history.repo),
        "--command",
        "sh check.sh",
        history.good,
        history.bad,
        "--json",
        cwd=tmp_path,
    )
    assert result.exit_code == 1, result.output
    assert [row["verdict"] for row in json.loads(result.stdout)["rows"]] == ["good", "bad"]


def test_a_command_probes_metrics_file_and_output_reach_the_store(history: History, tmp_path: Path) -> None:
    command = (
        """sh -c 'echo "{\\"metrics\\": {\\"total\\": 5}, \\"signature\\": \\"off by one\\"}" """
        """> "$REGTRACK_METRICS"; echo checked; exit 1'"""
    )
    row = run_json(tmp_path, "--repo", str(history.repo), "--command", command, "HEAD")
    assert (row["verdict"], row["metrics"], row["signature"]) == ("bad", {"total": 5.0}, "off by one")
    broken = command.replace('\\"metrics\\"', '\\"metric\\"')
    assert run_json(tmp_path, "--repo", str(history.repo), "--command", broken, "HEAD")["signature"] == "exit 1"
    with Store.open() as store:
        details = {run.signature: run.detail for run in store.runs()}
    assert details["off by one"] == "checked"
    assert details["exit 1"].startswith("REGTRACK_METRICS file ignored: unknown key 'metric'") and details[
        "exit 1"
    ].endswith("checked")


@pytest.mark.parametrize(
    ("command", "verdict", "outcome", "signature"),
    [
        ("sh -c 'exit 0'", "good", "pass", None),
        ("sh -c 'exit 3'", "bad", "fail", "exit 3"),
        ("sh -c 'exit 125'", "skip", "skip", "exit 125 (untestable)"),
        ("sh -c 'kill -ABRT $$'", "bad", "crash", "killed by SIGABRT"),
        ("sleep 30", "bad", "timeout", "timed out after 1s"),
    ],
)
def test_exit_codes_of_a_command_through_the_worker(
    history: History, tmp_path: Path, command: str, verdict: str, outcome: str, signature: str | None
) -> None:
    result = regtrack(
        "run", "--repo", str(history.repo), "--command", command, "--timeout", "1", "HEAD", "--json", cwd=tmp_path
    )
    [row] = json.loads(result.stdout)["rows"]
    assert (row["verdict"], row["cases"], row["signature"]) == (verdict, {"command": outcome}, signature)
    assert result.exit_code == {"good": 0, "bad": 1, "skip": 3}[verdict]


ENTRY_POINT_PROBE = """\
from probes import Case, Probe, ProbeResult
from tracker.core.verdicts import Outcome


def check(ctx, params):
    total = ctx.import_package("mylib").add(2, 2)
    return ProbeResult.passed() if total == 4 else ProbeResult(Outcome.FAIL, \
signature=f"installed probe: add(2, 2) == {total}")


ADD = Probe("mylib_add", 1, "add(2, 2) is 4", (Case("two-plus-two", {}),), check)
"""


def installed_distribution(where: Path) -> Path:
    """A distribution as pip would leave it in site-packages: its module and a .dist-info
    declaring the entry point, which importlib.metadata finds on sys.path."""
    info = where / "mylib_ci-1.0.dist-info"
    info.mkdir(parents=True)
    (where / "mylib_ci_probes.py").write_text(ENTRY_POINT_PROBE)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mylib-ci\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[regtrack.probes]\nmylib_add = mylib_ci_probes:ADD\n")
    return where


def test_a_probe_installed_through_an_entry_point_is_found_by_name_in_the_parent_and_the_worker(
    history: History, tmp_path: Path
) -> None:
    site = installed_distribution(tmp_path / "site")
    where = config_dir(tmp_path, history, 'probes = ["mylib_add"]\n')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(PROJECT_ROOT)])}
    command = [sys.executable, "-m", "tracker.cli", "bisect", "--good", history.good, "--bad", history.bad, "--json"]
    result = subprocess.run(command, cwd=where, env=env, capture_output=True, text=True)
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert (report["probe"], report["culprit"]) == ("mylib_add", history.culprit)
    assert report["culprit_result"]["signature"] == "installed probe: add(2, 2) == 5"
    unknown = subprocess.run(
        command, cwd=config_dir(tmp_path, history, 'probes = ["mylib_sub"]\n'), env=env, capture_output=True, text=True
    )
    assert unknown.returncode == 2
    assert "names unknown probe 'mylib_sub'; known probes: target_verify_metadata" in unknown.stderr
    assert "mylib_add" in unknown.stderr.strip().splitlines()[-1]


def test_a_worker_refuses_a_probe_whose_code_changed_since_the_parent_hashed_it(
    history: History, tmp_path: Path
) -> None:
    spec = command_spec("check", ["sh", "check.sh"], history.repo, inputs=("check.sh",))
    stale = resolve(spec).code_hash
    (tmp_path / "check.sh").write_text("exit 0\n")
    with WorkerClient(tmp_path / "worker.log") as worker:
        job = Job(
            "check",
            "command",
            str(history.repo),
            "cpu",
            "float32",
            0,
            source=spec.to_json(),
            code_hash=stale,
            timeout_s=30,
        )
        assert worker.run(job, 60).signature == "exit 1"  # the work tree is at the buggy head
        edited = command_spec("check", ["sh", "check.sh"], tmp_path, inputs=("check.sh",))
        with pytest.raises(UsageError, match="probe 'check' changed while this command ran"):
            worker.run(replace(job, source=edited.to_json()), 60)


def test_a_command_sees_the_users_environment_not_the_workers(
    history: History, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No bytecode prefix (every command would recompile what it imports), no safe-path flag,
    the user's PYTHONPATH without regtrack's own checkout."""
    monkeypatch.setenv("PYTHONPATH", "/the/users/path")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    shown = """sh -c 'echo "${PYTHONPYCACHEPREFIX-unset} ${PYTHONSAFEPATH-unset} $PYTHONPATH"; exit 1'"""
    row = run_json(tmp_path, "--repo", str(history.repo), "--command", shown, "HEAD")
    assert row["verdict"] == "bad"
    with Store.open() as store:
        [run] = store.runs()
    assert run.detail == "unset unset /the/users/path"
