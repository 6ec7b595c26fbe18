"""What a command that finds everything stored costs: no worker started, neither torch nor Alembic
imported. A CPU worker's environment is predicted in the parent, a local GPU's is told by
nvidia-smi, and each worker that does start reports its own before it runs anything: one on another
stack stops the command (one that words the GPU otherwise than nvidia-smi has the command measure
again as the workers tell it, checked on the GPU in test_sglang_gpu). A bisect answered from the
store alone is the same answer as the session that stored it, and one that needs a run makes it
over the store that writes, showing each step once."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from gitrepo import GitRepo

from probes.sources import ProbeSpec, command_spec, resolve
from tracker.bisect_options import BisectOptions, BisectReport
from tracker.bisect_session import Bisection
from tracker.core.errors import UsageError
from tracker.execution.environment import environment, environment_told_by_nvidia_smi
from tracker.execution.executors import LocalExecutor
from tracker.execution.protocol import Job
from tracker.measure import Prober
from tracker.stored_bisect import answer_from_store
from tracker.targets.templates import SGLANG_PROBES
from tracker.workspace import ExecutionOptions, Workspace

PROJECT_ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "alembic")
# Runs the CLI like ``python -m tracker.cli`` and says afterwards what the process had imported.
WRAPPER = f"""
import json, runpy, sys
sys.argv = ["regtrack", *sys.argv[2:]]
try:
    runpy.run_module("tracker.cli", run_name="__main__")
except SystemExit as exit:
    code = exit.code
with open(REPORT, "w") as out:
    json.dump({{"code": code, **{{name: name in sys.modules for name in {HEAVY!r}}}}}, out)
"""
NOTHING_HEAVY = {"torch": False, "alembic": False}


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    repo = GitRepo(tmp_path / "work")
    for i in range(8):
        repo.commit(f"Change {i}", {"value.txt": f"{i}\n", "check.sh": "test $(cat value.txt) -lt 5\n"})
    return repo


def cli(tmp_path: Path, *args: str) -> dict:
    return cli_output(tmp_path, *args)[0]


def bisect_args(repo: GitRepo, *more: str, bad: str = "HEAD") -> tuple[str, ...]:
    """A ``--command`` bisect of ``repo`` from HEAD~7 to ``bad``, with ``more`` options."""
    return ("bisect", "--repo", str(repo.path), "--command", "sh check.sh", "--good", "HEAD~7", "--bad", bad, *more)


def check_job(spec: ProbeSpec, root: Path) -> Job:
    """The job a worker runs for the command probe ``spec`` at ``root``."""
    return Job(
        "check",
        "command",
        str(root),
        "cpu",
        "float32",
        0,
        source=spec.to_json(),
        code_hash=resolve(spec).code_hash,
        timeout_s=30,
    )


def cli_output(tmp_path: Path, *args: str) -> tuple[dict, str, str]:
    """What the command imported and its exit code; its stdout and stderr."""
    report = tmp_path / "imports.json"
    code = WRAPPER.replace("REPORT", repr(str(report)))
    env = {**os.environ, "REGTRACK_HOME": str(tmp_path / "home"), "PYTHONPATH": str(PROJECT_ROOT)}
    env.pop("REGTRACK_DB_URL", None)
    done = subprocess.run(
        [sys.executable, "-c", code, "regtrack", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    return json.loads(report.read_text()), done.stdout, done.stderr


def worker_logs(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "home").rglob("worker-*.log"))


def test_a_command_bisect_that_finds_everything_stored_starts_no_worker_and_imports_no_torch_or_alembic(
    repo: GitRepo, tmp_path: Path
) -> None:
    args = bisect_args(repo)
    assert cli(tmp_path, *args) == {"code": 1, "torch": False, "alembic": True}, "the first opening migrates"
    started = worker_logs(tmp_path)
    assert started
    assert cli(tmp_path, *args) == {"code": 1, **NOTHING_HEAVY}
    assert worker_logs(tmp_path) == started, "a worker was started to run nothing"


def steps_shown(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("[")]


def test_a_bisect_answered_from_the_store_is_the_answer_of_the_session_that_stored_it(
    repo: GitRepo, tmp_path: Path
) -> None:
    args = bisect_args(repo, "--strategy", "binary", "--json")
    _, first_out, _ = cli_output(tmp_path, *args)
    imported, again_out, again_err = cli_output(tmp_path, *args)
    first, again = json.loads(first_out), json.loads(again_out)
    assert imported == {"code": 1, **NOTHING_HEAVY}
    assert first["executions"] > 0 and first["session"] is not None
    assert (again["executions"], again["session"], again["reused"]) == (0, None, len(again["steps"]))
    assert first["culprit"] == again["culprit"] == repo.git("rev-parse", "HEAD~2").strip()
    unchanged = (
        "culprit",
        "candidates",
        "confidence",
        "no_culprit",
        "strategy",
        "good",
        "bad",
        "culprit_result",
        "parent_result",
    )
    assert {k: again[k] for k in unchanged} == {k: first[k] for k in unchanged}
    assert [(s["sha"], s["verdict"]) for s in again["steps"]] == [(s["sha"], s["verdict"]) for s in first["steps"]]
    assert len(steps_shown(again_err)) == len(again["steps"])
    assert all("(stored)" in line for line in steps_shown(again_err))


def test_a_bisect_that_needs_one_run_more_runs_it_in_a_session_and_shows_each_step_once(
    repo: GitRepo, tmp_path: Path
) -> None:
    """The first bisect stores HEAD~7..HEAD~3; the second, to HEAD, finds the bad end unmeasured."""
    cli(tmp_path, *bisect_args(repo, "--strategy", "binary", bad="HEAD~2"))
    args = bisect_args(repo, "--strategy", "binary", "--json")
    imported, out, err = cli_output(tmp_path, *args)
    report = json.loads(out)
    assert imported["code"] == 1
    assert report["session"] is not None and report["executions"] >= 1
    assert report["culprit"] == repo.git("rev-parse", "HEAD~2").strip()
    shown = steps_shown(err)
    assert len(shown) == len(report["steps"]) and len(set(shown)) == len(shown), "a step was shown twice"


def test_a_good_end_that_fails_in_the_store_is_refused_as_a_session_refuses_it(repo: GitRepo, tmp_path: Path) -> None:
    cli(tmp_path, *bisect_args(repo))
    imported, _, err = cli_output(
        tmp_path,
        "bisect",
        "--repo",
        str(repo.path),
        "--command",
        "sh check.sh",
        "--good",
        "HEAD~2",
        "--bad",
        "HEAD",
        "--strategy",
        "binary",
    )
    assert imported == {"code": 2, **NOTHING_HEAVY}
    assert err.strip().splitlines()[-1].startswith("regtrack: error: the good end")


def test_a_worker_whose_environment_differs_from_the_prediction_runs_nothing(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A torch distribution only this process sees: the worker reports the real one."""
    fake = tmp_path / "only-here"
    (fake / "torch-0.0.1.dist-info").mkdir(parents=True)
    (fake / "torch-0.0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 0.0.1\n")
    monkeypatch.syspath_prepend(str(fake))
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    spec = command_spec("check", ["sh", "-c", "touch ran; exit 0"], repo.path)
    with LocalExecutor(log_dir=tmp_path / "logs") as executor:
        predicted = executor.environment()
        assert predicted.torch == "0.0.1"
        job = check_job(spec, tmp_path)
        with pytest.raises(UsageError, match=r"the probe worker reports another environment .* than regtrack"):
            executor.run_many([job])
    assert not (tmp_path / "ran").exists()


# Fails from the sixth commit on; before it, about one run in four fails at random.
FLAKY_CHECK = "test $(cat value.txt) -lt 5 && test $(od -An -N1 -tu1 /dev/urandom) -gt 60\n"


def full_bisect(repo: GitRepo, search: BisectOptions) -> BisectReport:
    with Workspace.open(repo.path) as ws, LocalExecutor() as executor:
        whole, probe = ws.command_probe("sh check.sh")
        prober = Prober.open(whole, probe, executor, "bisect")
        return Bisection(ws.store, ws.repo, prober, search).start("HEAD~7", "HEAD")


def comparable(report: BisectReport) -> tuple:
    steps = [(s.sha, s.verdict, s.reused) for s in report.steps]
    culprit = report.culprit.sha if report.culprit else None
    return (
        culprit,
        [c.sha for c in report.candidates],
        report.confidence,
        report.no_culprit,
        report.switch_reason,
        steps,
    )


@pytest.mark.parametrize("strategy", ["binary", "kary", "auto", "bayes"])
def test_the_answer_from_the_store_is_the_answer_a_session_gives(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, strategy: str
) -> None:
    """On a flaky history, after one session has stored its runs: the answer from the store, where
    there is one, equals a new session's, which then runs nothing; where there is none, the new
    session runs something."""
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)
    repo.commit("Make the check flaky", {"check.sh": FLAKY_CHECK})
    search = BisectOptions(strategy, workers=2 if strategy == "kary" else 1)
    full_bisect(repo, search)
    with Workspace.open_read_only(repo.path) as ws:
        whole, probe = ws.command_probe("sh check.sh")
        answer = answer_from_store(whole, probe, ExecutionOptions(), search, "HEAD~7", "HEAD")
    again = full_bisect(repo, search)
    if strategy in ("binary", "kary"):
        assert answer is not None, "a search that trusts one run per revision found its runs missing"
    if answer is None:
        assert again.executions > 0, "the answer from the store gave up on a bisect that needed no run"
        return
    assert again.executions == 0 and answer.report.executions == 0
    assert comparable(answer.report) == comparable(again)
    assert len(answer.steps) == len(again.steps)


def test_queries_start_no_worker_and_import_no_torch_or_alembic(repo: GitRepo, tmp_path: Path) -> None:
    cli(tmp_path, *bisect_args(repo))
    started = worker_logs(tmp_path)
    page = str(tmp_path / "report.html")
    queries = (
        ("history",),
        ("history", "--range", "HEAD~7..HEAD"),
        ("show", "HEAD"),
        ("regressions",),
        ("report", "--html", page),
    )
    for query in queries:
        assert cli(tmp_path, *query, "--repo", str(repo.path)) == {"code": 0, **NOTHING_HEAVY}, query
    assert worker_logs(tmp_path) == started


def test_a_query_of_a_repository_never_recorded_answers_nothing(repo: GitRepo, tmp_path: Path) -> None:
    cli(tmp_path, *bisect_args(repo))
    other = GitRepo(tmp_path / "other")
    other.commit("Only commit", {"a.txt": "a\n"})
    imported, out, _ = cli_output(tmp_path, "history", "--repo", str(other.path), "--json")
    assert (imported, json.loads(out)["runs"]) == ({"code": 0, **NOTHING_HEAVY}, [])


BUILT_IN_PROBES = (
    "target_verify_metadata",
    "target_verify_attention",
    "decode_graph_replay",
    "swa_page_table",
    *SGLANG_PROBES,
)


def test_the_built_in_probes_are_resolved_without_torch() -> None:
    """What a command that finds every result stored learns of a probe (name, version, code, cases):
    the demo's probes and the SGLang ones, whose judges import torch only when a worker runs them."""
    code = (
        "import sys; from probes.registry import get_probe; "
        f"probes = [get_probe(n) for n in {BUILT_IN_PROBES!r}]; "
        "[p.code_hash for p in probes]; print('torch' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},
    )
    assert done.stdout.strip() == "False"


def test_commits_recorded_before_take_their_trees_from_the_store_not_from_git(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit's tree never changes: once recorded, git is not asked again (here it could not answer)."""
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)
    shas = repo.git("rev-list", "--reverse", "HEAD").split()
    with Workspace.open(repo.path) as ws, LocalExecutor() as executor:
        whole, probe = ws.command_probe("sh check.sh")
        prober = Prober.open(whole, probe, executor, "bisect")
        recorded = prober.record_commits(shas[:6])
        shutil.rmtree(repo.path / ".git" / "objects")
        (repo.path / ".git" / "objects").mkdir()
        assert prober.record_commits(shas[:6]) == recorded
        with pytest.raises(UsageError, match="unknown revision"):
            prober.record_commits(shas)  # the last two were never recorded: git must answer for them


def fake_nvidia_smi(
    monkeypatch: pytest.MonkeyPatch, where: Path, answer: str = "NVIDIA H200, 9.0, 570.86.15, [N/A]", code: int = 0
) -> None:
    """First on PATH: an nvidia-smi that logs each call's arguments to ``where/calls`` and describes two GPUs."""
    bin_dir = where / "bin"
    bin_dir.mkdir(parents=True)
    script = bin_dir / "nvidia-smi"
    script.write_text(
        f'#!/bin/sh\necho "$*" >> {where / "calls"}\n'
        'case "$*" in *-L*) echo "GPU 0: NVIDIA H200 (UUID: GPU-a)"; echo "GPU 1: NVIDIA H200 (UUID: GPU-b)";; '
        f'*) echo "{answer}";; esac\nexit {code}\n'
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def test_a_gpu_is_told_by_one_nvidia_smi_call_for_the_device_the_first_worker_sees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_nvidia_smi(monkeypatch, tmp_path)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    told = environment_told_by_nvidia_smi("cuda", "1")
    assert told == replace(
        environment("cpu"), device="cuda", gpu_name="NVIDIA H200", compute_capability="9.0", driver="570.86.15"
    )
    assert environment_told_by_nvidia_smi("cuda:1", "4,7") is not None
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls == [
        "-i 1 --query-gpu=name,compute_cap,driver_version,mig.mode.current --format=csv,noheader",
        "-i 7 --query-gpu=name,compute_cap,driver_version,mig.mode.current --format=csv,noheader",
    ]
    with LocalExecutor("cuda", log_dir=tmp_path / "logs", gpu_told_by_nvidia_smi=True) as executor:
        assert executor.environment() == told
        assert executor.clients[0].pid is None, "no worker started"
    assert (tmp_path / "calls").read_text().splitlines()[2:] == [
        "-L",
        "-i 0 --query-gpu=name,compute_cap,driver_version,mig.mode.current --format=csv,noheader",
    ]


def test_a_gpu_is_not_told_in_this_process_unless_asked_and_unless_nvidia_smi_can(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_nvidia_smi(monkeypatch, tmp_path / "works")
    with LocalExecutor("cuda", log_dir=tmp_path / "logs") as executor:
        assert not executor.predicts_environment(), "only a command that may find everything stored asks"
    with LocalExecutor("cuda", log_dir=tmp_path / "logs", gpu_told_by_nvidia_smi=True) as executor:
        assert executor.predicts_environment()
        assert not executor.predicts_environment({"CUDA_VISIBLE_DEVICES": "1"}), "the target picks another GPU"
        assert not executor.predicts_environment({"PYTHONPATH": str(tmp_path)}), "the target moves Python"
        assert not executor.predicts_environment({"CUDA_DEVICE_ORDER": "FASTEST_FIRST"}), (
            "CUDA counts otherwise than nvidia-smi"
        )
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "FASTEST_FIRST")
    with LocalExecutor("cuda", log_dir=tmp_path / "logs", gpu_told_by_nvidia_smi=True) as executor:
        assert not executor.predicts_environment()
    monkeypatch.delenv("CUDA_DEVICE_ORDER")
    fake_nvidia_smi(monkeypatch, tmp_path / "mig", answer="NVIDIA A100-SXM4-40GB, 8.0, 570.86.15, Enabled")
    assert environment_told_by_nvidia_smi("cuda", "0") is None, "a MIG slice is a worker's to name"
    fake_nvidia_smi(monkeypatch, tmp_path / "fails", code=9)
    assert environment_told_by_nvidia_smi("cuda", "0") is None
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert environment_told_by_nvidia_smi("cuda", "0") is None
    with LocalExecutor("cuda", log_dir=tmp_path / "logs", gpu_told_by_nvidia_smi=True) as executor:
        assert not executor.predicts_environment()


@pytest.mark.slow
def test_results_stored_on_the_cpu_never_answer_a_bisect_on_a_gpu(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The GPU told by nvidia-smi has another fingerprint: the bisect runs a session, whose worker on
    this machine refuses the device (torch sees no CUDA here)."""
    args = bisect_args(repo)
    assert cli(tmp_path, *args)["code"] == 1
    fake_nvidia_smi(monkeypatch, tmp_path / "smi")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    imported, _, err = cli_output(tmp_path, *args, "--device", "cuda")
    assert imported["code"] == 2, err
    assert "--device cuda" in err.strip().splitlines()[-1]
    assert "--query-gpu=name,compute_cap,driver_version,mig.mode.current" in (tmp_path / "smi" / "calls").read_text()


def test_gpu_workers_count_the_gpus_as_nvidia_smi_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``nvidia-smi -L`` numbers GPUs in bus order and CUDA, by default, fastest first: each worker is
    told the bus order, unless this process chose an order of its own."""
    fake_nvidia_smi(monkeypatch, tmp_path / "smi")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    with LocalExecutor("cuda", workers=2, log_dir=tmp_path / "logs") as executor:
        assert [c._env for c in executor.clients] == [
            {"CUDA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
            {"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
        ]
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "FASTEST_FIRST")
    with LocalExecutor("cuda", log_dir=tmp_path / "logs") as executor:
        assert executor.clients[0]._env["CUDA_DEVICE_ORDER"] == "FASTEST_FIRST"


def test_workers_on_different_stacks_stop_the_command_before_the_second_runs_a_job(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As on a host with GPUs of two kinds: the first worker asked sets the stack results are stored
    under, and a second worker that reports another (here its Python finds another torch) stops the
    command at its first job, which it does not run."""
    fake = tmp_path / "other-torch"
    (fake / "torch-0.0.1.dist-info").mkdir(parents=True)
    (fake / "torch-0.0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 0.0.1\n")
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    spec = command_spec("check", ["sh", "-c", f"touch {tmp_path / 'ran'}"], repo.path)
    job = check_job(spec, tmp_path)
    with LocalExecutor(workers=2, log_dir=tmp_path / "logs") as executor:
        first = executor.environment({"PYTHONPATH": str(PROJECT_ROOT)})  # moves Python: a worker is asked
        assert first.torch != "0.0.1" and executor.clients[0].pid is not None
        with pytest.raises(UsageError, match=r"the probe workers run on different stacks .*torch 0\.0\.1"):
            executor.run_many(
                [replace(job, env={"PYTHONPATH": f"{fake}{os.pathsep}{PROJECT_ROOT}"})]
            )  # the next idle worker is the second
    assert not (tmp_path / "ran").exists()
