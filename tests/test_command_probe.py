"""Command probes: git bisect run's exit codes, the timeout, the output tail and $REGTRACK_METRICS,
run for real in a directory (and through the worker in tests/test_probe_sources.py)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from gitrepo import GitRepo
from hypothesis import given
from hypothesis import strategies as st

from probes.command import (
    METRICS_ENV,
    Written,
    metrics_problem,
    outcome_of_exit,
    read_metrics,
    run_command,
)
from probes.sources import (
    ProbeSpec,
    Source,
    adhoc_command_name,
    command_spec,
    resolve,
    split_command,
)
from tracker.core.verdicts import Outcome
from tracker.reporting import build_report
from tracker.workspace import Workspace


def sh(script: str, cwd: Path, timeout_s: float | None = None):
    return run_command(["sh", "-c", script], cwd, timeout_s)


@pytest.mark.parametrize(
    ("script", "outcome", "signature"),
    [
        ("exit 0", Outcome.PASS, None),
        ("exit 1", Outcome.FAIL, "exit 1"),
        ("exit 127", Outcome.FAIL, "exit 127"),
        ("exit 125", Outcome.SKIP, "exit 125 (untestable)"),
        ("kill -SEGV $$", Outcome.CRASH, "killed by SIGSEGV"),
        ("kill -TERM $$", Outcome.CRASH, "killed by SIGTERM"),
        ("exit 139", Outcome.CRASH, "exit 139 (128 + SIGSEGV)"),
        ("exit 143", Outcome.CRASH, "exit 143 (128 + SIGTERM)"),
        ("exit 255", Outcome.CRASH, "exit 255"),
        ("kill -KILL $$", Outcome.ERROR, "command killed by SIGKILL, out of memory?"),
        ("exit 137", Outcome.ERROR, "a process of the command (exit 137) killed by SIGKILL, out of memory?"),
    ],
)
def test_exit_codes_read_as_git_bisect_run_reads_them(
    tmp_path: Path, script: str, outcome: Outcome, signature: str | None
) -> None:
    result = sh(script, tmp_path)
    assert (result.outcome, result.signature) == (outcome, signature)


def test_the_command_runs_in_the_directory_with_no_stdin_and_its_output_tail_is_the_detail(tmp_path: Path) -> None:
    result = sh("pwd; for i in $(seq 1 100); do echo line $i; done; echo to stderr >&2; cat; exit 1", tmp_path)
    lines = result.detail.splitlines()
    assert lines[-1] == "to stderr" and lines[-2] == "line 100"
    assert len(lines) == 40 and str(tmp_path) not in result.detail  # only the tail is kept
    assert sh("pwd >&2; exit 3", tmp_path).detail == str(tmp_path)


def test_a_sigkill_a_shell_reports_as_exit_137_reads_as_the_commands_own_sigkill(tmp_path: Path) -> None:
    (tmp_path / "check.sh").write_text("sleep 30 &\nkill -9 $!\nwait $!\n")
    result = run_command(["sh", "check.sh"], tmp_path)
    assert (result.outcome, result.signature) == (
        Outcome.ERROR,
        "a process of the command (exit 137) killed by SIGKILL, out of memory?",
    )


def test_an_untestable_exit_is_stored_listed_and_queried_as_skip(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "repo")
    repo.commit("Add a readme", {"README": "hello\n"})
    env = {**os.environ, "REGTRACK_HOME": str(tmp_path / "home")}

    def regtrack(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tracker.cli", *args], cwd=repo.path, env=env, capture_output=True, text=True
        )

    ran = regtrack("run", "--command", "sh -c 'exit 125'", "HEAD", "--json")
    assert ran.returncode == 3, ran.stderr
    [row] = json.loads(ran.stdout)["rows"]
    assert (row["verdict"], row["cases"], row["signature"]) == ("skip", {"command": "skip"}, "exit 125 (untestable)")
    [listed] = json.loads(regtrack("history", "--outcome", "skip", "--json").stdout)["runs"]
    assert (listed["outcome"], listed["signature"]) == ("skip", "exit 125 (untestable)")
    assert json.loads(regtrack("history", "--outcome", "error", "--json").stdout)["runs"] == []
    with sqlite3.connect(tmp_path / "home" / "data" / "regtrack.db") as db:
        assert list(db.execute("SELECT outcome, signature FROM runs")) == [("skip", "exit 125 (untestable)")]


def test_the_report_explains_an_untestable_exit_with_its_signature(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = GitRepo(tmp_path / "repo")
    config = (
        '[targets.app]\nrepo = "."\npaths = ["src"]\n\n[targets.app.probes.check]\ncommand = ["sh", "-c", "exit 125"]\n'
    )
    sha = repo.commit("Add the app", {"src/app.txt": "app\n", "regtrack.toml": config})
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    ran = subprocess.run(
        [sys.executable, "-m", "tracker.cli", "run", "--probe", "check", "HEAD"],
        cwd=repo.path,
        capture_output=True,
        text=True,
    )
    assert ran.returncode == 3, ran.stderr
    ws = Workspace.open(repo.path)
    try:
        cell = build_report(ws, None, ("check",), None).cell(sha, "check")
    finally:
        ws.close()
    assert (cell.state, cell.signature) == ("skip", "exit 125 (untestable)")


def test_a_missing_program_fails_with_its_reason(tmp_path: Path) -> None:
    result = run_command(["./no-such-check.sh"], tmp_path)
    assert (
        result.outcome is Outcome.FAIL
        and result.signature == "cannot run './no-such-check.sh': No such file or directory"
    )


def test_past_its_timeout_the_command_and_what_it_started_are_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    result = sh(f"sleep 60 & echo $! > {pid_file}; echo waiting; wait", tmp_path, timeout_s=0.5)
    assert (result.outcome, result.signature) == (Outcome.TIMEOUT, "timed out after 0.5s")
    assert result.detail == "waiting"
    assert not alive(int(pid_file.read_text()))


def test_a_command_that_leaves_a_child_behind_is_judged_by_its_own_exit(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    result = sh(f"sleep 60 & echo $! > {pid_file}; exit 0", tmp_path, timeout_s=30)
    assert result.outcome is Outcome.PASS
    assert not alive(int(pid_file.read_text()))


def test_what_left_the_commands_process_group_but_not_its_session_is_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "regrouped.pid"
    regroup = f"import os, time; os.setpgid(0, 0); open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    script = (
        f"{shlex.quote(sys.executable)} -c {shlex.quote(regroup)} & "
        f"while [ ! -s {pid_file} ]; do sleep 0.01; done; exit 0"
    )
    assert sh(script, tmp_path, timeout_s=30).outcome is Outcome.PASS
    assert not alive(int(pid_file.read_text()))


def alive(pid: int) -> bool:
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return False
        if state == "Z":
            return False
        time.sleep(0.05)
    return True


def write_metrics(payload: str) -> str:
    return f"printf '%s' {shlex.quote(payload)} > \"${METRICS_ENV}\""


def test_metrics_and_signature_from_the_metrics_file(tmp_path: Path) -> None:
    payload = json.dumps({"metrics": {"max_abs_error": 0.25, "mismatched": 3}, "signature": "add(2, 2) == 5"})
    failed = sh(f"{write_metrics(payload)}; exit 1", tmp_path)
    assert (failed.outcome, failed.metrics, failed.signature) == (
        Outcome.FAIL,
        {"max_abs_error": 0.25, "mismatched": 3.0},
        "add(2, 2) == 5",
    )
    passed = sh(f"{write_metrics(payload)}; exit 0", tmp_path)
    assert (passed.outcome, passed.metrics, passed.signature) == (
        Outcome.PASS,
        {"max_abs_error": 0.25, "mismatched": 3.0},
        None,
    )


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "expected a JSON object with keys metrics, samples, signature, got list"),
        ('{"metrics": {}, "verdict": "bad"}', "unknown key 'verdict'"),
        ('{"metrics": [1]}', "metrics must be an object of names to numbers"),
        ('{"metrics": {"err": "high"}}', "metric 'err' is 'high', not a finite number"),
        ('{"metrics": {"err": true}}', "metric 'err' is True, not a finite number"),
        ('{"metrics": {"err": NaN}}', "NaN is not a number JSON allows"),
        ('{"metrics": {"err": 1e999}}', "metric 'err' is inf, not a finite number"),
        ('{"signature": 7}', "signature must be a string, not int"),
        ('{"samples": [1.0]}', "samples must be an object of names to lists of numbers"),
        ('{"samples": {"us": 3.0}}', "samples of 'us' must be a list of finite numbers"),
        ('{"samples": {"us": [1.0, "slow"]}}', "samples of 'us' must be a list of finite numbers"),
    ],
)
def test_a_malformed_metrics_file_is_noted_in_the_detail_and_ignored(
    tmp_path: Path, payload: str, problem: str
) -> None:
    result = sh(f"{write_metrics(payload)}; echo checked; exit 1", tmp_path)
    assert (result.outcome, result.metrics, result.signature) == (Outcome.FAIL, {}, "exit 1")
    first, last = result.detail.splitlines()[0], result.detail.splitlines()[-1]
    assert first.startswith(f"{METRICS_ENV} file ignored: ") and problem in first, first
    assert last == "checked"


def test_an_empty_or_missing_metrics_file_is_no_metrics(tmp_path: Path) -> None:
    assert read_metrics(tmp_path / "absent.json") == Written()
    (tmp_path / "empty.json").write_text("\n")
    assert read_metrics(tmp_path / "empty.json") == Written()
    (tmp_path / "huge.json").write_text(" " * (1 << 20) + "{}")
    assert read_metrics(tmp_path / "huge.json").problem == "it is over 1048576 bytes"


@given(st.integers(min_value=-64, max_value=255))
def test_every_exit_status_has_exactly_git_bisect_runs_reading(code: int) -> None:
    outcome = outcome_of_exit(code)
    if code == 0:
        assert outcome is Outcome.PASS
    elif code == 125:
        assert outcome is Outcome.SKIP
    elif code in (-signal.SIGKILL, 128 + signal.SIGKILL):
        assert outcome is Outcome.ERROR
    elif 1 <= code <= 127:
        assert outcome is Outcome.FAIL
    else:
        assert outcome is Outcome.CRASH


finite = st.floats(allow_nan=False, allow_infinity=False) | st.integers(min_value=-(2**53), max_value=2**53)


@given(
    st.dictionaries(st.text(max_size=8), finite, max_size=5),
    st.dictionaries(st.text(max_size=8), st.lists(finite, max_size=6), max_size=3),
    st.none() | st.text(max_size=20),
)
def test_well_formed_metrics_pass_validation_and_read_back(
    tmp_path_factory: pytest.TempPathFactory, metrics: dict, samples: dict, signature: str | None
) -> None:
    data = {"metrics": metrics, "samples": samples, "signature": signature}
    assert metrics_problem(data) is None
    path = tmp_path_factory.mktemp("metrics") / "m.json"
    path.write_text(json.dumps(data))
    floats = {k: [float(v) for v in values] for k, values in samples.items()}
    assert read_metrics(path) == Written({k: float(v) for k, v in metrics.items()}, floats, signature)


@given(
    st.lists(
        st.text(alphabet=st.characters(blacklist_characters="\x00"), min_size=1, max_size=10), min_size=1, max_size=6
    )
)
def test_a_command_line_splits_back_into_its_words_and_names_itself_stably(argv: list[str]) -> None:
    assert split_command(shlex.join(argv)) == argv
    name = adhoc_command_name(argv)
    assert name == adhoc_command_name(list(argv)) and name.startswith("command:") and len(name) == len("command:") + 8
    if len(argv) > 1:
        assert adhoc_command_name(argv[:-1]) != name


def test_a_spec_survives_the_trip_to_the_worker(tmp_path: Path) -> None:
    spec = ProbeSpec(
        "attn", Source.COMMAND, command=("sh", "ci/check.sh"), inputs=("ci/check.sh",), base=str(tmp_path), version=3
    )
    assert ProbeSpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec
    assert spec.argv() == ["sh", str(tmp_path / "ci" / "check.sh")]


def test_a_command_probes_code_hash_follows_its_command_line_and_inputs(tmp_path: Path) -> None:
    (tmp_path / "check.sh").write_text("exit 0\n")
    first = resolve(command_spec("c", ["sh", "check.sh"], tmp_path, inputs=("check.sh",)))
    assert resolve(command_spec("c", ["sh", "check.sh"], tmp_path, inputs=("check.sh",))).code_hash == first.code_hash
    assert (
        resolve(command_spec("c", ["sh", "check.sh", "-x"], tmp_path, inputs=("check.sh",))).code_hash
        != first.code_hash
    )
    (tmp_path / "check.sh").write_text("exit 0 # edited\n")
    assert resolve(command_spec("c", ["sh", "check.sh"], tmp_path, inputs=("check.sh",))).code_hash != first.code_hash
    assert first.version == 1 and [case.id for case in first.cases] == ["command"]
    assert os.path.isabs(first.check.argv[1])  # type: ignore[attr-defined]
