"""`regtrack report --html` end to end: the demo history scanned and bisected, then reported; the
data checked against what the scan and the bisect found, and the page loaded in Chromium."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from chromium import Browser
from click.testing import CliRunner, Result
from demo_histories import DemoHistories
from gitrepo import git

from tracker.cli.app import main
from tracker.core.errors import UsageError
from tracker.demo.history import DemoManifest
from tracker.report.model import ReportData
from tracker.reporting import build_report
from tracker.workspace import Workspace

# Every test here rests on a module fixture that measures the demo history with its torch probes.
pytestmark = pytest.mark.slow

SCRIPT_SUBJECT = "<script>document.title='pwned'</script>"
PROBES = ("target_verify_metadata", "swa_page_table")
PROBE_OPTIONS = ("--probe", PROBES[0], "--probe", PROBES[1])


@dataclass(frozen=True)
class Reported:
    repo: Path
    manifest: DemoManifest
    line: list[str]
    scan: dict[str, Any]
    bisect: dict[str, Any]
    written: Result
    page: Path
    data: ReportData
    by_env: dict[str, ReportData]
    unknown_env: str
    ranged: ReportData


def regtrack(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def inject_commit(repo: Path) -> str:
    """A commit outside the target paths whose subject is markup."""
    (repo / "docs").mkdir(exist_ok=True)
    (repo / "docs" / "injected.md").write_text("not part of the target\n")
    git(repo, "add", "--all", when=1_800_000_000)
    git(repo, "commit", "--quiet", "-m", SCRIPT_SUBJECT, when=1_800_000_000)
    return git(repo, "rev-parse", "HEAD").strip()


def build(repo: Path, range_spec: str | None = None, environment: str | None = None) -> ReportData:
    ws = Workspace.open(repo)
    try:
        return build_report(ws, range_spec, PROBES, environment)
    finally:
        ws.close()


def refusal(asked: Callable[[], object]) -> str:
    with pytest.raises(UsageError) as refused:
        asked()
    return str(refused.value)


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory, demo_histories: DemoHistories) -> Reported:
    home = tmp_path_factory.mktemp("report")
    repo = home / "demo"
    manifest = demo_histories.copy(60, repo)
    inject_commit(repo)
    line = git(repo, "rev-list", "--first-parent", "--reverse", "HEAD").split()
    bug = manifest.bugs["target_verify_overwrite"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("REGTRACK_HOME", str(home))
        patch.delenv("REGTRACK_DB_URL", raising=False)
        # The bisect comes first: after the scan every result it needs is stored, and a bisect
        # answered from stored results alone records no session.
        bisect = regtrack(
            "bisect",
            "--repo",
            str(repo),
            "--probe",
            PROBES[0],
            "--good",
            line[0],
            "--bad",
            f"{bug.fixed}~1",
            "--seed",
            "0",
            "--json",
        )
        assert bisect.exit_code == 1, bisect.output
        scan = regtrack("scan", "--repo", str(repo), *PROBE_OPTIONS, "--seed", "0", "--workers", "2", "--json")
        assert scan.exit_code == 0, scan.output
        page = home / "report.html"
        written = regtrack("report", "--repo", str(repo), "--html", str(page), *PROBE_OPTIONS)
        assert written.exit_code == 0, written.output
        return Reported(
            repo=repo,
            manifest=manifest,
            line=line,
            scan=json.loads(scan.stdout),
            bisect=json.loads(bisect.stdout),
            written=written,
            page=page,
            data=build(repo),
            by_env={"cpu": build(repo, environment="cpu")},
            unknown_env=refusal(lambda: build(repo, environment="no-such-gpu")),
            ranged=build(repo, f"{bug.fixed}..{bug.relanded}"),
        )


def test_rows_are_the_first_parent_line_oldest_first(reported: Reported) -> None:
    data = reported.data
    assert [c.sha for c in data.commits] == reported.line
    assert len(data.commits) == reported.manifest.commits + 1
    assert (data.commits[-1].subject, data.commits[-1].pr_number) == (SCRIPT_SUBJECT, None)
    assert data.probes == PROBES
    assert (
        reported.written.stdout
        == f"wrote {reported.page}: {len(data.commits)} commits, 2 probes, {len(data.transitions)} transitions\n"
    )


def test_cells_match_what_the_scan_found(reported: Reported) -> None:
    data, manifest, line = reported.data, reported.manifest, reported.line
    overwrite, swa = manifest.bugs["target_verify_overwrite"], manifest.bugs["swa_partial_page"]
    before = {sha: line[i - 1] for i, sha in enumerate(line) if i}
    assert overwrite.reverted and overwrite.relanded
    expected: dict[tuple[str, str], str] = {
        (before[overwrite.introduced], PROBES[0]): "pass",
        (overwrite.introduced, PROBES[0]): "fail",
        (overwrite.fixed, PROBES[0]): "pass",
        (overwrite.reverted, PROBES[0]): "fail",
        (overwrite.relanded, PROBES[0]): "pass",
        (swa.introduced, PROBES[1]): "fail",
        (swa.fixed, PROBES[1]): "pass",
        **{(sha, p): "skip" for sha in (manifest.untestable.first, manifest.untestable.last) for p in PROBES},
    }
    assert {key: data.cell(*key).state for key in expected} == expected
    for t in reported.scan["transitions"]:
        assert data.cell(t["sha"], t["probe"]).state == ("fail" if t["kind"] == "regression" else "pass")
    first_bad = data.cell(overwrite.introduced, PROBES[0])
    assert first_bad.runs == 3 and first_bad.signature  # confirmed twice by the scan, with its failure
    assert data.cell(manifest.untestable.first, PROBES[0]).signature  # why it could not be judged
    # The injected commit touches no target path: it shows its parent's results, measured or not.
    assert [data.cell(line[-1], p) for p in PROBES] == [data.cell(line[-2], p) for p in PROBES]
    assert all(data.cell(sha, p).state != "untested" for sha in line for p in PROBES)


def test_transitions_are_the_stored_ones_with_their_pairs(reported: Reported) -> None:
    shown = [(t.probe, t.sha, t.kind, t.pairs_with, t.pair_kind) for t in reported.data.transitions]
    scanned = [(t["probe"], t["sha"], t["kind"], t["pairs_with"], t["pair_kind"]) for t in reported.scan["transitions"]]
    assert sorted(shown) == sorted(scanned)
    assert {t.pair_kind for t in reported.data.transitions} == {None, "reverts", "relands"}
    assert all(t.candidates == (t.sha,) for t in reported.data.transitions)  # every transition is exact here


def test_stretches_are_the_scans(reported: Reported) -> None:
    shown = {(s.probe, s.kind, s.first, s.last) for s in reported.data.stretches}
    assert shown == {(s["probe"], s["kind"], s["first"], s["last"]) for s in reported.scan["stretches"]}
    untestable = reported.manifest.untestable
    assert shown == {(p, "untestable", untestable.first, untestable.last) for p in PROBES}


def test_the_bisect_with_its_steps_and_the_environment(reported: Reported) -> None:
    [b] = reported.data.bisects
    session = reported.bisect
    assert (b.session_id, b.probe, b.good, b.bad, b.status) == (
        session["session"],
        PROBES[0],
        session["good"],
        session["bad"],
        "done",
    )
    assert b.culprit == session["culprit"] == reported.manifest.bugs["target_verify_overwrite"].introduced
    assert b.candidates == tuple(session["candidates"])
    assert (b.strategy, b.confidence) == (session["strategy"], session["confidence"]) == ("auto", 1.0)
    assert [(s.sha, s.verdict, s.reused) for s in b.steps] == [
        (s["sha"], s["verdict"], s["reused"]) for s in session["steps"]
    ]
    assert b.steps
    [env] = reported.data.environments
    assert env.device == "cpu" and len(env.fingerprint) == 16


def test_environment_filter_and_range(reported: Reported) -> None:
    assert dict(reported.by_env["cpu"].cells) == dict(reported.data.cells)
    assert reported.by_env["cpu"].environments == reported.data.environments
    [env] = reported.data.environments
    assert reported.unknown_env.startswith("--env no-such-gpu matches no environment stored for this repository")
    assert reported.unknown_env.endswith(f"stored: cpu ({env.fingerprint})")
    bug = reported.manifest.bugs["target_verify_overwrite"]
    ranged = reported.ranged
    assert ranged.commits[0].sha == bug.fixed and ranged.commits[-1].sha == bug.relanded
    assert {(t.probe, t.sha) for t in ranged.transitions} == {
        (PROBES[0], sha) for sha in (bug.fixed, bug.reverted, bug.relanded)
    }
    assert all(ranged.cells[key] == reported.data.cells[key] for key in ranged.cells)


def test_the_page_loads_in_chromium_and_the_subject_stays_text(reported: Reported, browser: Browser) -> None:
    page = browser.load(reported.page)
    try:
        found = page.evaluate(
            """(() => ({
              title: document.title,
              scripts: document.querySelectorAll('script').length,
              rows: [...document.querySelectorAll('table.grid tbody tr')].map(r => r.id),
              commits: [...document.querySelectorAll('table.grid tbody tr')].map(r =>
                r.classList.contains('gap') ? parseInt(r.querySelector('td.sha').textContent.slice(2)) : 1
              ).reduce((a, b) => a + b, 0),
              cells: document.querySelectorAll('table.grid td.c').length,
              injected: document.getElementById('c-' + """
            + json.dumps(reported.line[-1])
            + """).querySelector('td.subj').textContent,
            }))()"""
        )
        assert page.problems() == []
        rows = found.pop("rows")
        assert found == {
            "title": f"regtrack report: {reported.data.repository}",
            "scripts": 0,
            "commits": len(reported.line),  # a gap row tells how many commits it holds
            "cells": len(rows) * len(PROBES),
            "injected": SCRIPT_SUBJECT,
        }
        # Every commit measured or where a transition is keeps a row of its own.
        named = {*(reported.data.measured or ()), *(t.sha for t in reported.data.transitions)}
        assert named and {f"c-{sha}" for sha in named} <= set(rows)
    finally:
        page.close()


def test_a_missing_directory_is_one_line_and_exit_code_2(
    reported: Reported, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    target = tmp_path / "missing" / "report.html"
    result = regtrack("report", "--repo", str(reported.repo), "--html", str(target))
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert (
        result.stderr.startswith("regtrack: error: ") and f"directory {target.parent} does not exist" in result.stderr
    )
    assert not target.parent.exists()
