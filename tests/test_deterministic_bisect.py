"""A deterministic probe is executed once per tree in a bisect: its result, measured or stored, is
final. A fresh bisect costs at most what ``git bisect run`` with the same check costs, plus its two
ends, with the culprit's check counted apart; a range already scanned is answered from the store
with no execution. Real git (and real ``git bisect run``), a probe file of the repository, real
SQLite, the CLI as a user runs it."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_in import regtrack
from gitrepo import GitRepo, git_env

from tracker.core.verdicts import Verdict
from tracker.execution.executors import LocalExecutor
from tracker.measure import Prober
from tracker.search.strategies import make_strategy
from tracker.workspace import Workspace

PROBE_FILE = """\
from probes import Case, Probe, ProbeResult
from tracker.core.verdicts import Outcome


def check(ctx, params):
    if any("broken" in part.read_text() for part in (ctx.root / "lib").iterdir()):
        return ProbeResult(Outcome.FAIL, {}, "lib is broken")
    return ProbeResult.passed()


SAME = Probe("same", 1, "lib is not broken", (Case("only", {}),), check, deterministic=True)
NOISY = Probe("noisy", 1, "lib is not broken, declared flaky", (Case("only", {}),), check)
"""

CONFIG = """\
[targets.lib]
repo = "."
paths = ["lib"]
[targets.lib.probes.same]
module = "ci/probe.py:SAME"
[targets.lib.probes.noisy]
module = "ci/probe.py:NOISY"
"""

COMMITS = 14
"""Commits after the base; every fourth touches only the docs, so it shares its parent's tree."""

GIT_CHECK = """\
#!/bin/sh
echo run >> {count}
REGTRACK_HOME={home} {python} -m tracker.cli run "$(git rev-parse HEAD)" --probe same > /dev/null 2>&1
status=$?
[ $status -eq 3 ] && exit 125
exit $status
"""


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)
    return tmp_path / "home"


def history(path: Path, culprit: int, broken_from_start: bool = False) -> tuple[GitRepo, list[str]]:
    """A base and ``COMMITS`` commits, each adding a file to ``lib``; commit ``culprit`` also breaks
    ``lib/state.txt`` (the base does, with ``broken_from_start``)."""
    repo = GitRepo(path)
    base = "broken\n" if broken_from_start else "fine\n"
    shas = [repo.commit("Base", {"ci/probe.py": PROBE_FILE, "regtrack.toml": CONFIG, "lib/state.txt": base})]
    for i in range(1, COMMITS + 1):
        if i % 4 == 0:
            shas.append(repo.commit(f"Docs {i}", {"docs.md": f"{i}\n"}))
        else:
            broken = {"lib/state.txt": "broken\n"} if i == culprit else {}
            shas.append(repo.commit(f"Change lib {i}", {f"lib/part{i}.txt": f"{i}\n", **broken}))
    return repo, shas


def cli(repo: GitRepo, *args: str, code: int = 1) -> dict[str, Any]:
    result = regtrack(*args, "--json", cwd=repo.path)
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


def executed(home: Path) -> dict[str, int]:
    """Executed (not copied) attempts per tree, from the runs table."""
    with sqlite3.connect(home / "data" / "regtrack.db") as db:
        rows = db.execute(
            "SELECT tree_hash, COUNT(DISTINCT attempt) FROM runs WHERE reused_from_id IS NULL GROUP BY tree_hash"
        ).fetchall()
    return dict(rows)


def git_bisect_run(repo: GitRepo, good: str, bad: str, work: Path) -> tuple[str, int]:
    """``git bisect run`` with ``regtrack run REV --probe same`` (exit 3 mapped to 125) in a home of
    its own: the first bad commit it names and how many times it ran the check."""
    count, script = work / "git-runs", work / "check.sh"
    script.write_text(GIT_CHECK.format(count=count, home=work / "git-home", python=sys.executable))
    git = ["git", "-C", str(repo.path), "bisect"]
    subprocess.run([*git, "start", bad, good], check=True, env=git_env(), capture_output=True)
    run = subprocess.run([*git, "run", "sh", str(script)], env=git_env(), capture_output=True, text=True)
    subprocess.run([*git, "reset"], check=True, env=git_env(), capture_output=True)
    first_bad = next(line.split()[0] for line in run.stdout.splitlines() if line.endswith("is the first bad commit"))
    return first_bad, len(count.read_text().splitlines()) if count.exists() else 0


@pytest.mark.slow
@pytest.mark.parametrize("culprit", [1, 6, COMMITS - 1])
def test_a_fresh_bisect_costs_at_most_git_bisect_runs_count_plus_its_two_ends(
    culprit: int, tmp_path: Path, home: Path
) -> None:
    repo, shas = history(tmp_path / "repo", culprit)
    report = cli(repo, "bisect", "--probe", "same", "--good", shas[0], "--bad", shas[-1])
    first_bad, git_runs = git_bisect_run(repo, shas[0], shas[-1], tmp_path)
    assert report["culprit"] == first_bad == shas[culprit]
    assert report["verification"]["status"] == "confirmed" and report["check_executions"] == 1
    search = report["executions"] - report["check_executions"]
    assert search <= git_runs + 2, f"{search} executions for the ends and the search, git bisect run took {git_runs}"
    per_tree = executed(home)
    assert sum(per_tree.values()) == report["executions"], "the count is the runs table's"
    assert set(per_tree.values()) == {1}, "no tree is executed twice"


@pytest.mark.parametrize("strategy", ["auto", "bayes"])
def test_a_flake_aware_strategy_never_reruns_a_deterministic_probe(strategy: str, tmp_path: Path, home: Path) -> None:
    repo, shas = history(tmp_path / "repo", 6)
    report = cli(repo, "bisect", "--probe", "same", "--good", shas[0], "--bad", shas[-1], "--strategy", strategy)
    assert report["culprit"] == shas[6] and report["confidence"] == 1.0 and report["switch_reason"] is None
    assert set(executed(home).values()) == {1}
    sampled = {step["sha"] for step in report["steps"]}
    assert len(sampled) == len(report["steps"]), "one step per revision"


def test_a_good_end_that_fails_is_final_for_a_deterministic_probe_and_rerun_for_another(tmp_path: Path) -> None:
    repo, shas = history(tmp_path / "repo", 6, broken_from_start=True)
    once = regtrack("bisect", "--probe", "same", "--good", shas[0], "--bad", shas[-1], cwd=repo.path)
    *steps, error = once.stderr.strip().splitlines()
    assert once.exit_code == 2 and len(steps) == 2, "each end measured once"
    assert error == (
        f"regtrack: error: the good end {shas[0][:12]} is bad under same (lib is broken); "
        "pass an older --good that passes"
    )
    noisy = regtrack("bisect", "--probe", "noisy", "--good", shas[0], "--bad", shas[-1], cwd=repo.path)
    *steps, error = noisy.stderr.strip().splitlines()
    assert noisy.exit_code == 2 and f"{shas[0][:12]} is bad in 3 runs under noisy" in error, noisy.output


def test_a_range_scanned_is_answered_from_the_store_and_its_stored_check_reused(tmp_path: Path) -> None:
    repo, shas = history(tmp_path / "repo", 6)
    scan = cli(repo, "scan", f"{shas[0]}..{shas[-1]}", "--probe", "same", "--verify")
    [checked] = scan["verifications"]
    assert checked["status"] == "confirmed" and checked["bad"] == shas[-1]
    inside = cli(repo, "bisect", "--probe", "same", "--good", shas[2], "--bad", shas[10])
    assert inside["culprit"] == shas[6]
    assert (inside["session"], inside["executions"], inside["check_executions"]) == (None, 0, 0)
    assert inside["verification"] == {**checked, "reused": True}, "the scan's check, against its own bad end"


def test_a_range_scanned_without_its_check_says_how_to_check_and_checks_when_asked(tmp_path: Path) -> None:
    repo, shas = history(tmp_path / "repo", 6)
    cli(repo, "scan", f"{shas[0]}..{shas[-1]}", "--probe", "same")
    good, bad = shas[2][:12], shas[10][:12]
    inside = cli(repo, "bisect", "--probe", "same", "--good", good, "--bad", bad)
    assert (inside["culprit"], inside["session"], inside["executions"]) == (shas[6], None, 0)
    said = inside["verification"]
    assert said["status"] == "skipped" and said["explanation"] == (
        f"not checked: the answer comes from stored results and no check of {shas[6][:12]} is stored; "
        f"`regtrack bisect --good {good} --bad {bad} --probe same --verify` runs it (one execution)"
    )
    asked = cli(repo, "bisect", "--probe", "same", "--good", good, "--bad", bad, "--verify")
    assert (asked["session"], asked["executions"], asked["check_executions"]) == (None, 1, 1)
    assert asked["verification"]["status"] == "confirmed" and asked["verification"]["bad"] == shas[10]
    text = regtrack("bisect", "--probe", "same", "--good", good, "--bad", bad, cwd=repo.path)
    assert "0 executions in 0 rounds" in text.stdout and "passes without" in text.stdout, text.output


@pytest.mark.parametrize(("probe", "attempts"), [("same", [1, 1, 1]), ("noisy", [1, 2, 3])])
def test_a_rerun_asked_of_a_deterministic_probe_is_its_stored_result(
    probe: str, attempts: list[int], tmp_path: Path
) -> None:
    repo, shas = history(tmp_path / "repo", 6)
    with Workspace.open(repo.path) as ws, LocalExecutor() as executor:
        prober = Prober.open(ws, ws.probe(probe), executor, "bisect")
        tree = prober.record_commits([shas[-1]])[shas[-1]]
        measured = [prober.measure(shas[-1], tree, rerun=True) for _ in attempts]
    assert [m.attempt for m in measured] == attempts
    assert prober.executions == len(set(attempts)), "a deterministic probe's one result is final"


@pytest.mark.parametrize("name", ["auto", "bayes"])
@pytest.mark.parametrize("culprit", [1, 17, 39])
def test_a_flake_aware_name_over_a_deterministic_oracle_asks_each_index_once(name: str, culprit: int) -> None:
    search = make_strategy(name, 40, flake_rate_prior=0.002, deterministic=True)
    asked: list[int] = []
    while not search.done():
        [index] = search.next_indices(1)
        asked.append(index)
        search.record(index, Verdict.BAD if index >= culprit else Verdict.GOOD)
    assert search.answer().culprit == culprit and search.answer().confidence == 1.0
    assert len(set(asked)) == len(asked) <= 6, "ceil(log2 39) indices, none twice"
