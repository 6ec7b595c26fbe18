"""`regtrack track`, the scheduled job: new commits, a new regression, reports, the lock."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree

import pytest
from click.testing import CliRunner, Result

from db.paths import data_dir
from gitrepo import git
from tracker.cli import main
from tracker.demo_bugs import SWA_PARTIAL_PAGE, apply_edits, read_tree, write_tree
from tracker.demo_history import DemoManifest, build_demo_history
from tracker.track import track_lock

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PROBES = ("--probe", "swa_page_table", "--probe", "target_verify_metadata")


@pytest.fixture()
def tracked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, DemoManifest]:
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)
    return tmp_path / "demo", build_demo_history(tmp_path / "demo", 60)


def track(repo: Path, out: Path, *extra: str) -> Result:
    return CliRunner().invoke(main, ["track", "--repo", str(repo), "--out", str(out), *PROBES, "--seed", "0", *extra], catch_exceptions=False)


def add_commits(repo: Path, count: int, bug_at: int | None) -> str | None:
    """Append commits to main; the one at ``bug_at`` plants the SWA bug. Returns its SHA."""
    culprit = None
    for n in range(count):
        (repo / "docs" / f"note-{n}.md").parent.mkdir(exist_ok=True)
        (repo / "docs" / f"note-{n}.md").write_text(f"note {n}\n")
        if n == bug_at:
            write_tree(apply_edits(read_tree(PROJECT_ROOT), [SWA_PARTIAL_PAGE.edit]), repo)
        git(repo, "add", "--all", when=1_800_000_000 + n)
        git(repo, "commit", "--quiet", "-m", f"Change {n} (#{9000 + n})", when=1_800_000_000 + n)
        if n == bug_at:
            culprit = git(repo, "rev-parse", "HEAD").strip()
    return culprit


def test_a_new_regression_is_bisected_reported_and_the_rerun_runs_nothing(tracked: tuple[Path, DemoManifest], tmp_path: Path) -> None:
    repo, manifest = tracked
    out = tmp_path / "reports"
    baseline = track(repo, out, "--json")
    assert baseline.exit_code == 0, baseline.output
    assert json.loads(baseline.stdout)["head"] == manifest.head

    culprit = add_commits(repo, 9, bug_at=5)
    found = track(repo, out, "--json")
    assert found.exit_code == 1, found.output
    report = json.loads(found.stdout)
    assert report["commits"] == 9
    assert [(r["probe"], r["sha"]) for r in report["new_regressions"]] == [("swa_page_table", culprit)]
    assert "swa_page_table stale in last page" in report["new_regressions"][0]["signature"]

    junit = ElementTree.parse(out / "regtrack-junit.xml").getroot()
    failures = {case.get("name"): case.find("failure") is not None for case in junit.iter("testcase")}
    assert failures == {"swa_page_table": True, "target_verify_metadata": False}
    summary = (out / "regtrack-summary.md").read_text()
    assert culprit[:12] in summary and "#9005" in summary and "regtrack bisect" in summary
    assert json.loads((out / "regtrack-track.json").read_text())["new_regressions"][0]["sha"] == culprit

    again = track(repo, out, "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["executions"] == 0 and json.loads(again.stdout)["commits"] == 0

    listed = CliRunner().invoke(main, ["regressions", "--open", "--repo", str(repo), "--json"], catch_exceptions=False)
    assert [r["sha"] for r in json.loads(listed.stdout)] == [culprit]


def test_a_second_concurrent_track_exits_with_a_clear_message(tracked: tuple[Path, DemoManifest], tmp_path: Path) -> None:
    repo, _ = tracked
    with track_lock(repo, "default", wait=False):
        blocked = track(repo, tmp_path / "reports")
    assert blocked.exit_code == 2
    assert "another `regtrack track` is running" in blocked.stderr and "--wait" in blocked.stderr
    assert track(repo, tmp_path / "reports").exit_code == 0
    assert any((data_dir() / "locks").iterdir())
