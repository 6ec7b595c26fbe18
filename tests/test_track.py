"""`regtrack track`, the scheduled job: new commits, a new regression, reports, the lock."""

from __future__ import annotations

import json
import shlex
from datetime import UTC, datetime
from pathlib import Path
from xml.etree import ElementTree

import pytest
from click.testing import CliRunner, Result
from demo_histories import DemoHistories
from gitrepo import git

from db.paths import data_dir
from db.store import Store
from tracker.cli.app import main
from tracker.core.measurements import CaseOutcome, Measurement
from tracker.core.records import CommitInfo, TransitionKind, TransitionRecord
from tracker.core.results import NewRegression, TrackResult
from tracker.core.verdicts import Outcome, Verdict
from tracker.demo.bugs import (
    BROKEN_IMPORT,
    SWA_PARTIAL_PAGE,
    apply_edits,
    read_tree,
    write_tree,
)
from tracker.demo.history import DemoManifest
from tracker.demo.target import DEMO_TARGET
from tracker.report.ci import markdown_summary
from tracker.track import track_lock

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PROBES = ("--probe", "swa_page_table", "--probe", "target_verify_metadata")
HOSTILE_SUBJECT = "<img src=x onerror=alert(1)> | plant the SWA bug"


@pytest.fixture()
def tracked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, demo_histories: DemoHistories
) -> tuple[Path, DemoManifest]:
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)
    repo = tmp_path / "my demo $HOME"  # the reproduce command must quote it
    return repo, demo_histories.copy(60, repo)


def track(repo: Path, out: Path, *extra: str) -> Result:
    return CliRunner().invoke(
        main, ["track", "--repo", str(repo), "--out", str(out), *PROBES, "--seed", "0", *extra], catch_exceptions=False
    )


def add_commits(repo: Path, count: int, bug_at: int | None) -> str | None:
    """Append commits to main; the one at ``bug_at`` plants the SWA bug, under a subject full of
    markup. Returns its SHA."""
    culprit = None
    for n in range(count):
        (repo / "docs" / f"note-{n}.md").parent.mkdir(exist_ok=True)
        (repo / "docs" / f"note-{n}.md").write_text(f"note {n}\n")
        if n == bug_at:
            write_tree(apply_edits(read_tree(PROJECT_ROOT), [SWA_PARTIAL_PAGE.edit]), repo)
        git(repo, "add", "--all", when=1_800_000_000 + n)
        subject = HOSTILE_SUBJECT if n == bug_at else f"Change {n}"
        git(repo, "commit", "--quiet", "-m", f"{subject} (#{9000 + n})", when=1_800_000_000 + n)
        if n == bug_at:
            culprit = git(repo, "rev-parse", "HEAD").strip()
    return culprit


@pytest.mark.slow
def test_a_new_regression_is_bisected_reported_and_the_rerun_runs_nothing(
    tracked: tuple[Path, DemoManifest], tmp_path: Path
) -> None:
    repo, manifest = tracked
    out = tmp_path / "reports"
    baseline = track(repo, out, "--json")
    assert baseline.exit_code == 0, baseline.output
    assert json.loads(baseline.stdout)["head"] == manifest.head

    culprit = add_commits(repo, 9, bug_at=5)
    assert culprit is not None
    found = track(repo, out, "--json")
    assert found.exit_code == 1, found.output
    report = json.loads(found.stdout)
    assert report["commits"] == 9
    assert [(r["probe"], r["sha"]) for r in report["new_regressions"]] == [("swa_page_table", culprit)]
    assert "swa_page_table stale in last page" in report["new_regressions"][0]["signature"]

    assert junit_failures(out) == {"swa_page_table": f"failing since {culprit[:12]}"}
    summary = (out / "regtrack-summary.md").read_text()
    assert culprit[:12] in summary and "#9005" in summary
    assert "&lt;img src=x onerror=alert(1)&gt; \\| plant the SWA bug (#9005)" in summary and "<img" not in summary
    [reproduce] = [line for line in summary.splitlines() if line.startswith("Reproduce: ")]
    command = shlex.split(reproduce.removeprefix("Reproduce: ").strip("`"))
    assert command[:4] == ["regtrack", "bisect", "--repo", str(repo)]
    assert command[command.index("--bad") + 1] == culprit[:12]
    assert json.loads((out / "regtrack-track.json").read_text())["new_regressions"][0]["sha"] == culprit

    again = track(repo, out, "--json")
    assert again.exit_code == 1, "the head still fails"
    assert json.loads(again.stdout)["executions"] == 0 and json.loads(again.stdout)["commits"] == 0
    assert junit_failures(out) == {"swa_page_table": f"failing since {culprit[:12]}"}, (
        "the culprit comes from the stored transitions"
    )

    listed = CliRunner().invoke(main, ["regressions", "--open", "--repo", str(repo), "--json"], catch_exceptions=False)
    assert [r["sha"] for r in json.loads(listed.stdout)["regressions"]] == [culprit]


def junit_failures(out: Path) -> dict[str | None, str]:
    """Each failing test case's message up to its signature."""
    junit = ElementTree.parse(out / "regtrack-junit.xml").getroot()
    return {
        case.get("name"): (failure.get("message") or "").split(":")[0]
        for case in junit.iter("testcase")
        if (failure := case.find("failure")) is not None
    }


def test_a_head_that_fails_at_the_first_run_fails_since_the_baseline_or_earlier(
    tracked: tuple[Path, DemoManifest], tmp_path: Path
) -> None:
    repo, _ = tracked
    add_commits(repo, 2, bug_at=0)
    head = git(repo, "rev-parse", "HEAD").strip()
    out = tmp_path / "reports"
    first = track(repo, out, "--json")
    assert first.exit_code == 1, first.output
    assert json.loads(first.stdout)["new_regressions"] == [], "a baseline finds no regression"
    assert junit_failures(out) == {"swa_page_table": f"failing since {head[:12]} or earlier"}
    at_head = {h["probe"]: h["verdict"] for h in json.loads(first.stdout)["at_head"]}
    assert at_head == {"swa_page_table": "bad", "target_verify_metadata": "good"}
    assert "| `swa_page_table` | bad | failing since" in (out / "regtrack-summary.md").read_text()


@pytest.mark.slow
def test_a_head_that_no_probe_can_judge_exits_3_with_every_case_skipped(
    tracked: tuple[Path, DemoManifest], tmp_path: Path
) -> None:
    repo, _ = tracked
    out = tmp_path / "reports"
    assert track(repo, out).exit_code == 0
    write_tree(apply_edits(read_tree(PROJECT_ROOT), [BROKEN_IMPORT]), repo)
    git(repo, "add", "--all", when=1_800_000_000)
    git(repo, "commit", "--quiet", "-m", "Move the kernel registry", when=1_800_000_000)
    broken = track(repo, out, "--json")
    assert broken.exit_code == 3, broken.output
    suite = ElementTree.parse(out / "regtrack-junit.xml").getroot().find("testsuite")
    assert suite is not None and (suite.get("failures"), suite.get("skipped")) == ("0", "2")
    skipped = [case.find("skipped") for case in suite.iter("testcase")]
    assert all(s is not None and "untestable at" in (s.get("message") or "") for s in skipped)
    assert "0 failing, 2 untestable, 0 passing" in (out / "regtrack-summary.md").read_text()

    add_commits(repo, 1, bug_at=None)  # still untestable
    write_tree(read_tree(PROJECT_ROOT), repo)
    git(repo, "add", "--all", when=1_800_000_100)
    git(repo, "commit", "--quiet", "-m", "Fix the import after the registry move", when=1_800_000_100)
    mended = track(repo, out, "--json")
    assert mended.exit_code == 0, "an untestable new commit before a judged head is a stretch, not a failure"
    assert json.loads(mended.stdout)["commits"] == 2


@pytest.mark.slow
def test_a_second_concurrent_track_exits_with_a_clear_message(
    tracked: tuple[Path, DemoManifest], tmp_path: Path
) -> None:
    repo, _ = tracked
    with Store.open() as store, track_lock(store, repo, DEMO_TARGET, wait=False):
        blocked = track(repo, tmp_path / "reports")
    assert blocked.exit_code == 2
    assert "another `regtrack track` is running" in blocked.stderr and "--wait" in blocked.stderr
    assert track(repo, tmp_path / "reports").exit_code == 0
    assert any((data_dir() / "locks").iterdir())


def test_the_reproduce_command_survives_backticks_and_quotes_in_the_repository_path() -> None:
    sha, parent = "c" * 40, "p" * 40
    commit = CommitInfo(sha, (parent,), "Break `it` | <b>now</b>", "A <a@example.com>", datetime.now(UTC), 7)
    failing = CaseOutcome("case", Outcome.FAIL, "err <1> | `x`", {"err": 0.5})
    regression = NewRegression(
        TransitionRecord(
            "swa_page_table", sha, TransitionKind.REGRESSION, None, None, (sha,), commit.authored_at, "track"
        ),
        commit,
        Measurement(sha, "t" * 40, Verdict.BAD, (failing,), reused=False),
        parent,
    )
    result = TrackResult("default", "main", sha, parent, 1, new_regressions=[regression])
    repo = Path("/srv/it's `odd` $HOME")
    summary = markdown_summary(result, repo)
    assert "| Break `it` \\| &lt;b&gt;now&lt;/b&gt; | err &lt;1&gt; \\| `x` |" in summary
    [reproduce] = [line for line in summary.splitlines() if line.startswith("Reproduce: ")]
    span = reproduce.removeprefix("Reproduce: ")
    assert span.startswith("``") and span.endswith("``") and not span.startswith("```")
    assert shlex.split(span.strip("`"))[3] == str(repo)
