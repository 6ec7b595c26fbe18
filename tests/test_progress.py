"""Progress a person and a CI log can read: plain step lines without a terminal, a live bar with
one, signatures cut in tables and whole in JSON, and nothing else on stderr.

The commands run as a user runs them, ``python -m tracker.cli`` in a subprocess whose stderr is a
pipe (no terminal), against real git repositories and real workers.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from demo_histories import DemoHistories
from gitrepo import GitRepo
from rich.console import Console

from tracker.bisect_options import Step
from tracker.bisect_session import StepProgress
from tracker.cli import progress, render
from tracker.core.measurements import CaseOutcome, Measurement
from tracker.core.verdicts import Outcome, Verdict
from tracker.probing import MeasuredRow

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# [3/~9] 1a2b3c4d5e6f bad 2.1 s  <subject>  — <signature>; run, scan and track name the probe.
STEP = re.compile(
    r"\[(?P<n>\d+)/(?P<final>~?)(?P<total>\d+)\] (?P<sha>[0-9a-f]{12})(?: (?P<probe>[\w.:-]+))? "
    r"(?P<verdict>good|bad|skip) (?P<seconds>\d+\.\d) s(?: \((?P<how>stored|rerun)\))?  "
    r"(?P<subject>.*?)(?:  — (?P<signature>.*))?"
)
LONG = "Rework the page-table translation for sliding-window attention so that partial pages of the window are kept"
TAIL = "TAIL-OF-THE-SIGNATURE"
CANDIDATES = 16
FIRST_BAD = 11


def regtrack(home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "REGTRACK_HOME": str(home), "PYTHONPATH": str(PROJECT_ROOT)}
    env.pop("REGTRACK_DB_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "tracker.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A good end and CANDIDATES commits, each changing ``value``; from FIRST_BAD on ``check.sh``
    fails with a signature of 200 characters. Subjects run past 80 columns."""
    repo = GitRepo(tmp_path_factory.mktemp("progress") / "repo")
    signature = "value too high: " + "x" * 160 + " " + TAIL
    metrics = shlex.quote(json.dumps({"signature": signature}))
    check = f'test "$(cat value)" -lt {FIRST_BAD} && exit 0\nprintf \'%s\' {metrics} > "$REGTRACK_METRICS"\nexit 1\n'
    shas = [repo.commit("Add the check", {"check.sh": check, "value": "0\n"})]
    for value in range(1, CANDIDATES + 1):
        shas.append(repo.commit(f"{LONG} (step {value}, #{100 + value})", {"value": f"{value}\n"}))
    return repo.path, shas


def binary_bisect(shas: list[str]) -> tuple[str, ...]:
    """A binary ``--command`` bisect over the whole history, its report as JSON."""
    return (
        "bisect",
        "--command",
        "sh check.sh",
        "--good",
        shas[0],
        "--bad",
        shas[-1],
        "--strategy",
        "binary",
        "--json",
    )


def steps_of(stderr: str) -> list[re.Match[str]]:
    lines = stderr.splitlines()
    matches = [STEP.fullmatch(line) for line in lines]
    assert all(matches), "every stderr line is a plain step line:\n" + "\n".join(
        line for line, m in zip(lines, matches) if not m
    )
    return [m for m in matches if m]


def test_a_bisect_without_a_terminal_prints_one_plain_line_per_step(
    history: tuple[Path, list[str]], tmp_path: Path
) -> None:
    repo, shas = history
    result = regtrack(tmp_path / "home", repo, *binary_bisect(shas))
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["culprit"] == shas[FIRST_BAD]
    steps = steps_of(result.stderr)
    assert len(steps) == len(report["steps"])
    assert [int(m["n"]) for m in steps] == list(range(1, len(steps) + 1))
    assert [m["sha"] for m in steps] == [s["sha"][:12] for s in report["steps"]]
    assert [m["verdict"] for m in steps] == [s["verdict"] for s in report["steps"]]
    subjects = {sha[:12]: f"{LONG} (step {i}, #{100 + i})" for i, sha in enumerate(shas)}
    for m in steps[1:]:
        assert m["subject"] == subjects[m["sha"]], "the subject whole, on the step's one line"
    last = steps[-1]
    assert (last["final"], last["total"]) == ("", last["n"]), "the last step's N is the number of steps, and known"
    assert all(m["final"] == "~" for m in steps[:-1])
    for m in steps:
        if m["verdict"] == "bad":
            assert (
                m["signature"] is not None
                and len(m["signature"]) == render.SIGNATURE_WIDTH
                and m["signature"].endswith("…")
            )
            assert TAIL not in m["signature"]
    assert report["culprit_result"]["signature"].endswith(TAIL), "--json keeps the signature whole"


def test_binary_announces_the_ends_and_ceil_log2_n_steps_and_keeps_its_word(
    history: tuple[Path, list[str]], tmp_path: Path
) -> None:
    repo, shas = history
    result = regtrack(tmp_path / "home", repo, *binary_bisect(shas))
    totals = [int(m["total"]) for m in steps_of(result.stderr)]
    assert totals[0] == 2 + math.ceil(math.log2(CANDIDATES)), "both ends, then ceil(log2 n) bisection steps"
    assert totals == sorted(totals, reverse=True), "the estimate never grows on a deterministic history"
    assert len(totals) in (totals[0] - 1, totals[0])


def test_a_second_bisect_reports_every_step_as_stored(history: tuple[Path, list[str]], tmp_path: Path) -> None:
    repo, shas = history
    args = binary_bisect(shas)
    regtrack(tmp_path / "home", repo, *args)
    again = steps_of(regtrack(tmp_path / "home", repo, *args).stderr)
    assert again and all(m["how"] == "stored" and m["seconds"] == "0.0" for m in again)


def test_run_tables_cut_signatures_and_json_keeps_them_whole(history: tuple[Path, list[str]], tmp_path: Path) -> None:
    repo, shas = history
    home = tmp_path / "home"
    as_json = regtrack(home, repo, "run", shas[-1], shas[1], "--command", "sh check.sh", "--json")
    rows = json.loads(as_json.stdout)["rows"]
    assert rows[0]["signature"].endswith(TAIL) and len(rows[0]["signature"]) > 180
    steps = steps_of(as_json.stderr)
    assert [(m["n"], m["total"], m["final"]) for m in steps] == [("1", "2", ""), ("2", "2", "")]
    assert steps[0]["probe"] == rows[0]["probe"] and steps[0]["signature"].endswith("…")
    table = regtrack(home, repo, "run", shas[-1], "--command", "sh check.sh")
    assert "value too high" in table.stdout and "…" in table.stdout
    assert TAIL not in table.stdout


def test_measurements_table_cuts_the_signature_to_its_width() -> None:
    signature = "s" * 79 + "!" + "never shown"
    row = MeasuredRow("a" * 40, "subject", "p", Verdict.BAD, signature, {}, False, {})
    console = Console(file=StringIO(), width=400, highlight=False)
    console.print(render.measurements_table([row]))
    shown = console.file.getvalue()  # type: ignore[attr-defined]
    assert "s" * 79 + "…" in shown and "!" not in shown and "never shown" not in shown
    assert (
        render.cut("short") == "short" and render.cut("x" * 80) == "x" * 80 and render.cut("x" * 81) == "x" * 79 + "…"
    )


def measurement(verdict: Verdict, signature: str | None) -> Measurement:
    outcome = Outcome.PASS if verdict is Verdict.GOOD else Outcome.FAIL
    return Measurement(
        "1a2b3c4d5e6f" + "0" * 28, "tree", verdict, (CaseOutcome("case", outcome, signature, {}),), False
    )


def live(workers: int, steps: list[tuple[Verdict, StepProgress]]) -> str:
    console = Console(file=StringIO(), force_terminal=True, width=200, highlight=False)
    with progress.Reporter(console, "bisect demo") as reporter:
        assert reporter.live
        watcher = progress.Watcher(reporter, workers)
        for verdict, state in steps:
            m = measurement(verdict, "off by +2" if verdict is Verdict.BAD else None)
            watcher.bisected(Step(m.sha, verdict, False), m, state, "Fix the \x1b[31m page table")
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", console.file.getvalue())  # type: ignore[attr-defined]


def test_on_a_terminal_a_bar_says_n_of_m_and_the_steps_left() -> None:
    shown = live(
        1,
        [
            (Verdict.GOOD, StepProgress(1, 9, 16, 6, 0.4)),
            (Verdict.BAD, StepProgress(2, 9, 16, 6, 1.2)),
            (Verdict.BAD, StepProgress(3, 9, 8, 5, 2.1)),
        ],
    )
    assert "3 of ~9" in shown
    assert "8 candidate trees, roughly 6 steps left" in shown
    assert "[3/~9] 1a2b3c4d5e6f bad 2.1 s  Fix the \\x1b[31m page table  — off by +2" in shown, (
        "control characters spelled out"
    )


def test_on_a_terminal_kary_counts_rounds_and_a_finished_bisect_says_done() -> None:
    shown = live(4, [(Verdict.BAD, StepProgress(4, 14, 20, 2, 3.0))])
    assert "4 of ~14" in shown and "20 candidate trees, roughly 3 rounds of 4 left" in shown
    done = live(1, [(Verdict.BAD, StepProgress(7, 7, 1, 0, 1.0))])
    assert "7 of 7" in done and "done (1 candidate tree)" in done and "[7/7] " in done


def test_plain_lines_say_stored_rerun_and_the_probe() -> None:
    tick = progress.Tick(
        2, 5, False, "f" * 40, "skip", 0.04, "Subject", probe="swa_page_table", stored=True, signature="no backend"
    )
    assert progress.plain_line(tick) == "[2/~5] ffffffffffff swa_page_table skip 0.0 s (stored)  Subject  — no backend"
    rerun = progress.Tick(3, 3, True, "e" * 40, "good", 12.25, "S", rerun=True, signature="ignored when good")
    assert progress.plain_line(rerun) == "[3/3] eeeeeeeeeeee good 12.2 s (rerun)  S"


@pytest.fixture(scope="module")
def demo(demo_histories: DemoHistories) -> Path:
    return demo_histories.shared(60)[0]


@pytest.mark.slow
def test_run_on_the_demo_prints_nothing_on_stderr_but_its_steps(demo: Path, tmp_path: Path) -> None:
    """The demo's probes import torch in the parent and in the worker: no NumPy warning, nothing else."""
    result = regtrack(tmp_path / "home", demo, "run", "HEAD", "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)["rows"]
    steps = steps_of(result.stderr)
    assert [m["probe"] for m in steps] == [r["probe"] for r in rows] and len(steps) == len(rows) >= 2
    assert "Warning" not in result.stderr
