"""Bad input: one line on stderr saying what is wrong and how to mend it, exit code 2, nothing stored."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from demo_histories import DemoHistories
from gitrepo import GitRepo

from db.store import Store
from tracker.cli.app import main
from tracker.demo.history import DemoManifest


@pytest.fixture(scope="module")
def demo(demo_histories: DemoHistories) -> tuple[Path, DemoManifest]:
    return demo_histories.shared(60)


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)
    return tmp_path / "home"


def regtrack(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def assert_usage_error(result: Result, *fragments: str) -> None:
    """Exit 2 and one error line (progress lines may come before it)."""
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("regtrack: error: ")]
    assert len(errors) == 1 and result.stderr.strip().endswith(errors[0]), result.stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]


def nothing_stored() -> bool:
    with Store.open() as store:
        return not store.runs()


def test_unknown_revision(demo: tuple[Path, DemoManifest]) -> None:
    repo, manifest = demo
    assert_usage_error(
        regtrack("bisect", "--repo", str(repo), "--good", "nope", "--bad", manifest.head), "unknown revision 'nope'"
    )
    assert nothing_stored()


def test_good_not_an_ancestor_of_bad(demo: tuple[Path, DemoManifest]) -> None:
    repo, manifest = demo
    assert_usage_error(
        regtrack("bisect", "--repo", str(repo), "--good", manifest.head, "--bad", manifest.untestable.mended),
        "not an ancestor",
    )
    assert nothing_stored()


def test_good_equal_to_bad(demo: tuple[Path, DemoManifest]) -> None:
    repo, manifest = demo
    assert_usage_error(regtrack("bisect", "--repo", str(repo), "--good", manifest.head, "--bad", manifest.head), "good")


@pytest.mark.slow
def test_good_end_that_fails_is_reported_with_its_evidence(demo: tuple[Path, DemoManifest]) -> None:
    repo, manifest = demo
    overwrite = manifest.bugs["target_verify_overwrite"]
    result = regtrack("bisect", "--repo", str(repo), "--good", overwrite.introduced, "--bad", overwrite.reverted or "")
    assert_usage_error(result, "the good end", "is bad", "max_seq_len_q off by", "older --good")


@pytest.mark.slow
def test_bad_end_that_passes_is_reported(demo: tuple[Path, DemoManifest]) -> None:
    repo, manifest = demo
    overwrite = manifest.bugs["target_verify_overwrite"]
    result = regtrack("bisect", "--repo", str(repo), "--good", overwrite.fixed, "--bad", manifest.head)
    assert_usage_error(result, "the bad end", "is good in 10 runs", "--bad that fails")


def test_binary_trusts_one_run_of_each_end(demo: tuple[Path, DemoManifest]) -> None:
    repo, manifest = demo
    overwrite = manifest.bugs["target_verify_overwrite"]
    result = regtrack(
        "bisect", "--repo", str(repo), "--good", overwrite.fixed, "--bad", manifest.head, "--strategy", "binary"
    )
    assert_usage_error(result, "the bad end", "is good under", "--bad that fails")


def test_ends_with_one_target_tree_have_nothing_to_bisect(demo: tuple[Path, DemoManifest]) -> None:
    repo, manifest = demo
    result = regtrack("bisect", "--repo", str(repo), "--good", manifest.flaky.first, "--bad", manifest.flaky.last)
    assert_usage_error(result, "same tree under the target's paths", "pick ends where the target differs")
    assert nothing_stored()


@pytest.mark.parametrize(
    ("option", "value"), [("--strategy", "bisect"), ("--confidence", "1.5"), ("--max-runs", "0"), ("--workers", "0")]
)
def test_bad_search_options(demo: tuple[Path, DemoManifest], option: str, value: str) -> None:
    repo, manifest = demo
    result = regtrack(
        "bisect", "--repo", str(repo), "--good", manifest.untestable.mended, "--bad", manifest.head, option, value
    )
    assert result.exit_code == 2 and f"Invalid value for '{option}'" in result.stderr
    assert nothing_stored()


def test_untestable_good_end_is_reported(demo: tuple[Path, DemoManifest]) -> None:
    repo, manifest = demo
    result = regtrack("bisect", "--repo", str(repo), "--good", manifest.untestable.first, "--bad", manifest.head)
    assert_usage_error(result, "the old end --good", "is skip", "import error", "--assume-ends")


def test_missing_and_bare_repositories(tmp_path: Path) -> None:
    assert_usage_error(regtrack("run", "--repo", str(tmp_path / "absent"), "HEAD"), str(tmp_path / "absent"))
    GitRepo(tmp_path / "bare.git", bare=True)
    assert_usage_error(regtrack("run", "--repo", str(tmp_path / "bare.git"), "HEAD"), "bare")


def test_unknown_probe_and_target(demo: tuple[Path, DemoManifest]) -> None:
    repo, manifest = demo
    assert_usage_error(
        regtrack("run", "--repo", str(repo), "--probe", "nope", "HEAD"), "unknown probe 'nope'", "known probes"
    )
    assert_usage_error(regtrack("run", "--repo", str(repo), "--target", "nope", "HEAD"), "nope")


def test_malformed_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = GitRepo(tmp_path / "repo")
    repo.commit("first", {"regtrack.toml": "[targets.backend\nrepo = '.'\n"})
    monkeypatch.chdir(repo.path)
    assert_usage_error(regtrack("run", "HEAD"), "regtrack.toml")


def test_bisect_needs_both_ends_or_resume(demo: tuple[Path, DemoManifest]) -> None:
    repo, _ = demo
    result = regtrack("bisect", "--repo", str(repo), "--good", "HEAD")
    assert result.exit_code == 2 and "--good and --bad" in result.stderr
    assert_usage_error(regtrack("bisect", "--repo", str(repo), "--resume"), "no unfinished bisect")


@pytest.mark.slow
def test_locked_database(demo: tuple[Path, DemoManifest], home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, manifest = demo
    database = home / "locked.db"
    home.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("REGTRACK_DB_URL", f"sqlite:///{database}")
    Store.open().close()
    holder = sqlite3.connect(database, timeout=0)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        assert_usage_error(regtrack("run", "--repo", str(repo), "--probe", "swa_page_table", manifest.head), "locked")
    finally:
        holder.rollback()
        holder.close()
    assert nothing_stored()


def test_unwritable_database_location(
    demo: tuple[Path, DemoManifest], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, manifest = demo
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("REGTRACK_DB_URL", f"sqlite:///{blocker}/sub/regtrack.db")
    assert_usage_error(regtrack("run", "--repo", str(repo), manifest.head), "REGTRACK_DB_URL")
