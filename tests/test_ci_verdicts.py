"""Verdicts a CI gate can trust: exit 3 for commits no probe could judge, bisects for a fix, and
results found through a commit's target tree. Real git, real SQLite, real workers, the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from demo_histories import DemoHistories
from gitrepo import git
from hypothesis import given
from hypothesis import strategies as st

from tracker.bisect_options import BisectOptions, Step, searched
from tracker.bisecting import bisect
from tracker.cli.app import main
from tracker.core.exits import ExitStatus, exit_status
from tracker.core.verdicts import Verdict
from tracker.demo.history import DemoManifest
from tracker.probing import Selection, Watch
from tracker.search.strategies import BinarySearch

PROBES = ("--probe", "target_verify_metadata", "--probe", "swa_page_table")


@pytest.fixture()
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, demo_histories: DemoHistories) -> tuple[Path, DemoManifest]:
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)
    repo = tmp_path / "demo"
    return repo, demo_histories.copy(60, repo)


def regtrack(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


# -- exit statuses ---------------------------------------------------------------------------------

verdict_lists = st.dictionaries(
    st.text("0123456789abcdef", min_size=1, max_size=4), st.lists(st.sampled_from(Verdict), max_size=4), max_size=5
)


@given(verdict_lists)
def test_any_bad_verdict_is_bad_else_an_unjudged_commit_is_3(verdicts: dict[str, list[Verdict]]) -> None:
    status = exit_status(verdicts)
    assert (status is ExitStatus.BAD) == any(Verdict.BAD in v for v in verdicts.values())
    if status is ExitStatus.OK:
        assert all(Verdict.GOOD in v for v in verdicts.values()), "every commit asked about was judged"
    if status is ExitStatus.UNJUDGED:
        assert any(set(v) <= {Verdict.SKIP} for v in verdicts.values())


@given(verdict_lists, st.text("xyz", min_size=1))
def test_a_commit_only_skipped_makes_a_clean_run_3_and_a_bad_one_1(
    verdicts: dict[str, list[Verdict]], extra: str
) -> None:
    clean = {sha: [*v, Verdict.GOOD] for sha, v in verdicts.items() if Verdict.BAD not in v}
    assert exit_status(clean) is ExitStatus.OK
    assert exit_status({**clean, extra: [Verdict.SKIP, Verdict.SKIP]}) is ExitStatus.UNJUDGED
    assert exit_status({**clean, extra: []}) is ExitStatus.UNJUDGED
    assert exit_status({**clean, extra: [Verdict.SKIP, Verdict.BAD]}) is ExitStatus.BAD


@pytest.mark.slow
def test_run_exits_3_where_no_probe_can_judge_the_revision(demo: tuple[Path, DemoManifest]) -> None:
    repo, manifest = demo
    broken = regtrack("run", "--repo", str(repo), *PROBES, "--json", manifest.untestable.first)
    assert broken.exit_code == 3, broken.output
    assert {row["verdict"] for row in json.loads(broken.stdout)["rows"]} == {"skip"}
    with_good = regtrack("run", "--repo", str(repo), *PROBES, manifest.untestable.first, manifest.untestable.mended)
    assert with_good.exit_code == 3, "one commit asked about was not judged"
    introduced = manifest.bugs["target_verify_overwrite"].introduced
    with_bad = regtrack("run", "--repo", str(repo), *PROBES, manifest.untestable.first, introduced)
    assert with_bad.exit_code == 1, "a bad verdict wins over an unjudged commit"
    assert regtrack("run", "--repo", str(repo), *PROBES, manifest.untestable.mended).exit_code == 0


# -- bisect --find-fix -----------------------------------------------------------------------------


@given(st.sampled_from(Verdict), st.booleans())
def test_searched_verdicts_swap_good_and_bad_only_for_a_fix_search(verdict: Verdict, find_fix: bool) -> None:
    assert searched(searched(verdict, find_fix), find_fix) is verdict
    assert (searched(verdict, find_fix) is verdict) == (not find_fix or verdict is Verdict.SKIP)


@given(st.integers(2, 200).flatmap(lambda size: st.tuples(st.just(size), st.integers(1, size - 1))))
def test_a_binary_search_fed_inverted_verdicts_finds_the_first_good_index(case: tuple[int, int]) -> None:
    size, fix = case
    search = BinarySearch(size)
    while not search.done():
        for index in search.next_indices(1):
            search.record(index, searched(Verdict.GOOD if index >= fix else Verdict.BAD, True))
    assert search.answer().culprit == fix


@pytest.mark.slow
def test_find_fix_names_the_commit_that_fixed_the_overwrite(demo: tuple[Path, DemoManifest]) -> None:
    repo, manifest = demo
    overwrite = manifest.bugs["target_verify_overwrite"]
    args = (
        "bisect",
        "--repo",
        str(repo),
        "--probe",
        "target_verify_metadata",
        "--find-fix",
        "--bad",
        overwrite.introduced,
        "--good",
        overwrite.fixed,
    )
    found = regtrack(*args, "--json")
    assert found.exit_code == 1, found.output
    report = json.loads(found.stdout)
    assert report["culprit"] == overwrite.fixed and report["find_fix"] and report["found"] == "first fixed commit"
    assert (report["good"], report["bad"]) == (overwrite.fixed, overwrite.introduced)
    assert report["culprit_result"]["verdict"] == "good" and report["parent_result"]["verdict"] == "bad"
    worded = regtrack(*args)
    assert f"first fixed commit: {overwrite.fixed}" in worded.stdout
    assert "first bad commit" not in worded.stdout
    page = repo.parent / "report.html"
    assert regtrack("report", "--repo", str(repo), "--html", str(page)).exit_code == 0
    assert "first fixed commit" in page.read_text(), "the HTML report words a fix search too"


@pytest.mark.slow
def test_find_fix_checks_that_the_old_end_fails_and_the_new_end_passes(demo: tuple[Path, DemoManifest]) -> None:
    repo, manifest = demo
    overwrite = manifest.bugs["target_verify_overwrite"]
    base = ("bisect", "--repo", str(repo), "--probe", "target_verify_metadata", "--strategy", "binary", "--find-fix")
    passing_old = regtrack(*base, "--bad", manifest.untestable.mended, "--good", overwrite.fixed)
    assert passing_old.exit_code == 2
    assert "with --find-fix the old end must fail, but --bad" in passing_old.stderr and "is good" in passing_old.stderr
    failing_new = regtrack(*base, "--bad", overwrite.introduced, "--good", overwrite.reverted or "")
    assert failing_new.exit_code == 2
    assert "with --find-fix the new end must pass, but --good" in failing_new.stderr and "is bad" in failing_new.stderr
    swapped = regtrack(*base, "--bad", overwrite.fixed, "--good", overwrite.introduced)
    assert swapped.exit_code == 2 and "must be older than --good" in swapped.stderr
    assert len(swapped.stderr.strip().splitlines()) == 1


def test_a_trusting_bisect_whose_good_end_fails_stops_with_one_line(demo: tuple[Path, DemoManifest]) -> None:
    repo, manifest = demo
    overwrite = manifest.bugs["target_verify_overwrite"]
    args = ("bisect", "--repo", str(repo), "--probe", "target_verify_metadata", "--strategy", "binary")
    failing_good = regtrack(*args, "--good", overwrite.introduced, "--bad", overwrite.reverted or "")
    assert failing_good.exit_code == 2, failing_good.output
    assert (
        failing_good.stderr.strip()
        .splitlines()[-1]
        .startswith(f"regtrack: error: the good end {overwrite.introduced[:12]} is bad")
    )


class Interrupted(Exception):
    """Stands for the user's ^C after the session's first steps were stored."""


@pytest.mark.slow
def test_a_resumed_find_fix_session_keeps_searching_for_the_fix(demo: tuple[Path, DemoManifest]) -> None:
    repo, manifest = demo
    overwrite = manifest.bugs["target_verify_overwrite"]
    stored: list[str] = []

    class StopAfterTheEnds(Watch):
        def bisected(self, step: Step, *_: object) -> None:
            stored.append(step.sha)
            if len(stored) == 3:
                raise Interrupted

    # fresh: a session is recorded, and interrupted, even where every result is stored
    selection = Selection(repo, probes=("target_verify_metadata",), fresh=True)
    search = BisectOptions(strategy="binary", find_fix=True)
    with pytest.raises(Interrupted):
        bisect(selection, overwrite.fixed, overwrite.introduced, search, watch=StopAfterTheEnds())
    assert stored[:2] == [overwrite.introduced, overwrite.fixed], "the old end is measured first"

    refused = regtrack("bisect", "--repo", str(repo), "--probe", "target_verify_metadata", "--resume", "--find-fix")
    assert refused.exit_code == 2 and "drop --find-fix" in refused.stderr
    resumed = regtrack("bisect", "--repo", str(repo), "--probe", "target_verify_metadata", "--resume", "--json")
    assert resumed.exit_code == 1, resumed.output
    report = json.loads(resumed.stdout)
    assert report["find_fix"] and report["culprit"] == overwrite.fixed
    assert [s["sha"] for s in report["steps"][:3]] == stored, "the stored steps are replayed, not measured again"


# -- results measured at another commit with the same tree ---------------------------------------


def docs_commit(repo: Path, name: str, when: int) -> str:
    (repo / "docs").mkdir(exist_ok=True)
    (repo / "docs" / name).write_text(f"{name}\n")
    git(repo, "add", "--all", when=when)
    git(repo, "commit", "--quiet", "-m", f"Document {name}", when=when)
    return git(repo, "rev-parse", "HEAD").strip()


def test_show_and_history_list_results_measured_at_a_commit_with_the_same_tree(demo: tuple[Path, DemoManifest]) -> None:
    repo, manifest = demo
    head = manifest.head
    assert regtrack("run", "--repo", str(repo), "--probe", "swa_page_table", head).exit_code == 0
    first, second = docs_commit(repo, "a.md", 1_900_000_000), docs_commit(repo, "b.md", 1_900_000_001)
    reused = regtrack("run", "--repo", str(repo), "--probe", "swa_page_table", "--json", second)
    assert json.loads(reused.stdout)["rows"][0]["reused"] is True

    shown = regtrack("show", "--repo", str(repo), "--json", second)
    runs = json.loads(shown.stdout)["runs"]
    assert runs and all(r["sha"] == second and r["measured_at"] == head and r["same_tree"] for r in runs)
    assert f"{head[:12]}, same tree" in regtrack("show", "--repo", str(repo), second).stdout
    own = json.loads(regtrack("show", "--repo", str(repo), "--json", head).stdout)["runs"]
    assert own and not any("measured_at" in r for r in own)

    in_range = regtrack("history", "--repo", str(repo), "--range", f"{first}..{second}", "--json")
    listed = json.loads(in_range.stdout)["runs"]
    assert listed and all(r["sha"] == first and r["measured_at"] == head and r["same_tree"] for r in listed)
    assert "same tree" in regtrack("history", "--repo", str(repo), "--range", f"{first}..{second}").stdout
    whole = json.loads(regtrack("history", "--repo", str(repo), "--json").stdout)["runs"]
    assert {r["sha"] for r in whole} == {head} and not any("measured_at" in r for r in whole)
