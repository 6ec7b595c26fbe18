"""A culprit that checks itself: after a bisect (or a scan, or the scheduled job) names commit C
before the bad end B, regtrack measures B with C reverted. Real git repositories built here, a
command probe, real SQLite; the commands run as a user runs them."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.config import Config
from cli_in import regtrack
from demo_histories import DemoHistories
from gitrepo import GitRepo
from sqlalchemy import create_engine, inspect

from db.store import Store
from tracker.core.verification import VerificationStatus
from tracker.report.html import render_html
from tracker.reporting import build_report
from tracker.workspace import Workspace

CHECK = "sh check.sh"
# Fails where ``a`` or ``b`` holds "broken": two independent ways to break it.
CHECK_SCRIPT = "! grep -q broken a && ! grep -q broken b\n"


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)
    return tmp_path / "home"


def history(path: Path, later: list[dict[str, str]]) -> tuple[GitRepo, list[str]]:
    """A good base, three commits touching ``other``, the culprit (``a`` broken), then ``later``."""
    repo = GitRepo(path)
    shas = [repo.commit("Add the check", {"check.sh": CHECK_SCRIPT, "a": "a is fine\n", "b": "b is fine\n"})]
    shas += [repo.commit(f"Touch other {i}", {"other": f"{i}\n"}) for i in range(3)]
    shas.append(repo.commit("Rework a (#12)", {"a": "a is broken\n"}))
    shas += [repo.commit(f"Later {i}", files) for i, files in enumerate(later)]
    return repo, shas


def cli(repo: GitRepo, *args: str, code: int = 1) -> dict[str, Any]:
    result = regtrack(*args, "--json", cwd=repo.path)
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


def bisect(repo: GitRepo, good: str, bad: str, *more: str) -> dict[str, Any]:
    return cli(repo, "bisect", "--command", CHECK, "--good", good, "--bad", bad, *more)


def state(repo: GitRepo) -> tuple[str, ...]:
    return (
        repo.git("status", "--porcelain", "--untracked-files=all"),
        (repo.path / ".git" / "index").read_bytes().hex(),
        repo.git("rev-parse", "HEAD"),
        repo.git("for-each-ref"),
    )


def test_a_culprit_whose_revert_makes_the_bad_end_pass_is_confirmed_at_one_execution(tmp_path: Path) -> None:
    repo, shas = history(tmp_path / "repo", [{"other": "later\n"}, {"other": "later still\n"}])
    (repo.path / "scratch").write_text("the user's uncommitted work\n")
    before = state(repo)
    report = bisect(repo, shas[0], shas[-1])
    assert report["culprit"] == shas[4]
    checked = report["verification"]
    assert checked["status"] == "confirmed" and checked["verdict"] == "good" and not checked["reused"]
    assert f"{shas[-1][:12]} passes without {shas[4][:12]}" in checked["explanation"]
    assert repo.git("rev-parse", f"{checked['checked']}^1").strip() == shas[-1]
    assert repo.git("show", f"{checked['checked']}:a") == "a is fine\n"
    assert state(repo) == before, "the checkout, index, HEAD and refs are as they were"

    unchecked = cli(repo, "bisect", "--command", CHECK, "--good", shas[0], "--bad", shas[-1], "--no-verify", "--fresh")
    assert unchecked["verification"]["status"] == "skipped"
    assert unchecked["verification"]["explanation"] == "skipped: --no-verify"
    assert report["executions"] == unchecked["executions"] + 1, "one more execution: the bad end without the culprit"


def test_a_second_identical_bisect_shows_the_stored_check_and_runs_nothing(tmp_path: Path) -> None:
    repo, shas = history(tmp_path / "repo", [{"other": "later\n"}])
    first = bisect(repo, shas[0], shas[-1])
    again = bisect(repo, shas[0], shas[-1])
    assert (again["session"], again["executions"]) == (None, 0)
    assert again["verification"] == {**first["verification"], "reused": True}

    with Store.open() as store:
        repo_id = store.repository(repo.path)
        [session] = store.sessions(repo_id)
        found = store.verification(repo_id, session.target, first["probe"], shas[4])
        assert session.result is not None and session.result["verification"] == first["verification"]
        assert session.result["executions"] == first["executions"]
    assert found is not None and found.to_json() == first["verification"]


def test_a_stored_answer_never_checked_says_how_to_check_it_and_runs_the_check_when_asked(tmp_path: Path) -> None:
    repo, shas = history(tmp_path / "repo", [{"other": "later\n"}])
    unchecked = bisect(repo, shas[0], shas[-1], "--no-verify")
    assert unchecked["verification"]["status"] == "skipped"
    again = bisect(repo, shas[0], shas[-1])
    assert (again["session"], again["executions"], again["check_executions"]) == (None, 0, 0), "nothing runs unasked"
    command = f"regtrack bisect --good {shas[0][:12]} --bad {shas[-1][:12]} --command 'sh check.sh' --verify"
    assert again["verification"]["status"] == "skipped"
    assert again["verification"]["explanation"] == (
        f"not checked: the answer comes from stored results and no check of {shas[4][:12]} is stored; "
        f"`{command}` runs it (one execution)"
    )
    checked = bisect(repo, *shlex.split(command)[3:6:2], "--verify")
    assert checked["session"] is None, "every step is stored"
    assert checked["verification"]["status"] == "confirmed"
    assert (checked["executions"], checked["check_executions"]) == (1, 1)


def test_a_later_commit_that_breaks_the_check_another_way_leaves_the_culprit_not_confirmed(tmp_path: Path) -> None:
    repo, shas = history(tmp_path / "repo", [{"other": "later\n"}, {"b": "b is broken too\n"}, {"other": "last\n"}])
    report = bisect(repo, shas[0], shas[-1])
    assert report["culprit"] == shas[4]
    checked = report["verification"]
    assert checked["status"] == "not confirmed" and checked["verdict"] == "bad"
    assert "a later commit between" in checked["explanation"] and "misled" in checked["explanation"]
    c, b = shas[4][:12], shas[-1][:12]
    assert checked["next_steps"] == [
        f"regtrack scan {c}..{b} --command 'sh check.sh'",
        f"regtrack run {c}^ {c} --command 'sh check.sh' --fresh",
        f"regtrack bisect --good {shas[0][:12]} --bad {b} --command 'sh check.sh' --strategy bayes --fresh",
    ]
    scan = cli(repo, *shlex.split(checked["next_steps"][0])[1:])
    assert (scan["first"], scan["last"]) == (shas[4], shas[-1]), "the commands suggested are this CLI's"
    rerun = cli(repo, *shlex.split(checked["next_steps"][1])[1:])
    assert [(row["sha"], row["verdict"], row["reused"]) for row in rerun["rows"]] == [
        (shas[3], "good", False),
        (shas[4], "bad", False),
    ]


def test_a_later_rewrite_of_the_culprits_lines_is_does_not_apply_and_c_itself_was_checked(tmp_path: Path) -> None:
    repo, shas = history(tmp_path / "repo", [{"a": "a is broken, and rewritten\n"}, {"other": "later\n"}])
    report = bisect(repo, shas[0], shas[-1])
    checked = report["verification"]
    assert checked["status"] == "does not apply"
    assert checked["conflicts"] == ["a"]
    assert (checked["checked"], checked["verdict"]) == (shas[4], "bad")
    assert f"{shas[4][:12]} itself against its parent was checked" in checked["explanation"]
    assert f"good at {shas[3][:12]} and bad at {shas[4][:12]}" in checked["explanation"]


def test_a_culprit_that_reverts_a_fix_says_which_fix_it_undid(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "repo")
    repo.commit("Add the check", {"check.sh": CHECK_SCRIPT, "a": "a is broken\n", "b": "b is fine\n"})
    fix = repo.commit("Fix a (#5)", {"a": "a is fine\n"})
    repo.commit("Touch other", {"other": "1\n"})
    repo.git("revert", "--no-edit", fix)
    culprit = repo.head()
    bad = repo.commit("Touch other again", {"other": "2\n"})
    report = bisect(repo, fix, bad)
    assert report["culprit"] == culprit
    checked = report["verification"]
    assert (checked["status"], checked["undoes"]) == ("confirmed", fix)
    assert checked["explanation"].startswith(f"{culprit[:12]} reverts {fix[:12]}, which fixed command:")


def test_a_fix_search_is_not_checked(tmp_path: Path) -> None:
    repo, shas = history(tmp_path / "repo", [{"other": "later\n"}, {"a": "a is fine\n"}])
    report = bisect(repo, shas[-1], shas[4], "--find-fix")
    assert report["culprit"] == shas[-1]
    assert report["verification"]["status"] == "skipped"
    assert report["verification"]["explanation"].startswith("skipped: a fix search")


def test_the_report_shows_the_check_the_session_stored(tmp_path: Path) -> None:
    repo, shas = history(tmp_path / "repo", [{"other": "later\n"}])
    report = bisect(repo, shas[0], shas[-1])
    with Workspace.open(repo.path) as ws:
        data = build_report(ws, None, (report["probe"],), None)
    [shown] = data.bisects
    assert shown.verification is not None and shown.verification.to_json() == report["verification"]
    page = " ".join(render_html(data).split())
    assert 'verification: <span class="pill s-pass">confirmed</span>' in page


@pytest.mark.slow
def test_scan_checks_each_regression_when_asked(tmp_path: Path) -> None:
    repo, shas = history(tmp_path / "repo", [{"other": "later\n"}, {"a": "a is fine\n"}, {"b": "b is broken\n"}])
    plain = cli(repo, "scan", f"{shas[0]}..{shas[-1]}", "--command", CHECK)
    assert plain["verifications"] == []
    checked = cli(repo, "scan", f"{shas[0]}..{shas[-1]}", "--command", CHECK, "--verify")
    found = {(v["culprit"], v["bad"]): v["status"] for v in checked["verifications"]}
    assert found == {(shas[4], shas[5]): "confirmed", (shas[7], shas[7]): "confirmed"}, (
        "each regression against the last commit it failed at before the next transition"
    )
    assert checked["executions"] == 0, "both reverted trees are the fix's, which the scan measured"
    assert all(v["reused"] for v in checked["verifications"])


@pytest.mark.slow
def test_track_checks_each_new_regression_and_writes_it_into_its_reports(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "repo")
    repo.commit("Add the check", {"check.sh": CHECK_SCRIPT, "a": "a is fine\n", "b": "b is fine\n"})
    out = tmp_path / "reports"
    track = ("track", "--command", CHECK, "--out", str(out))
    cli(repo, *track, code=0)
    culprit = repo.commit("Rework a (#12)", {"a": "a is broken\n"})
    head = repo.commit("Touch other", {"other": "1\n"})
    result = cli(repo, *track)
    [new] = result["new_regressions"]
    assert (new["sha"], new["verification"]["status"], new["verification"]["bad"]) == (culprit, "confirmed", head)
    summary = (out / "regtrack-summary.md").read_text()
    assert "Verification: **confirmed**" in summary

    repo.commit("Fix a (#13)", {"a": "a is fine\n"})
    later = repo.commit("Rework b (#14)", {"b": "b is broken\n"})
    unchecked = cli(repo, *track, "--no-verify")
    [new] = unchecked["new_regressions"]
    assert (new["sha"], new["verification"]["status"]) == (later, "skipped")


@pytest.mark.slow
def test_the_demos_reintroduced_bug_names_the_fix_its_revert_undid(
    tmp_path: Path, demo_histories: DemoHistories
) -> None:
    path = tmp_path / "demo"
    manifest = demo_histories.copy(150, path)
    overwrite = manifest.bugs["target_verify_overwrite"]
    assert overwrite.reverted and overwrite.relanded
    bad = subprocess.run(
        ["git", "-C", str(path), "rev-parse", f"{overwrite.relanded}^1"], capture_output=True, text=True, check=True
    ).stdout.strip()
    result = regtrack(
        "bisect", "--good", overwrite.fixed, "--bad", bad, "--probe", "target_verify_metadata", "--json", cwd=path
    )
    report = json.loads(result.stdout)
    assert report["culprit"] == overwrite.reverted
    checked = report["verification"]
    assert (checked["status"], checked["undoes"]) == (VerificationStatus.CONFIRMED.value, overwrite.fixed)
    assert f"reverts {overwrite.fixed[:12]}, which fixed target_verify_metadata" in checked["explanation"]


def test_a_database_at_0005_is_upgraded_with_its_rows_kept(tmp_path: Path) -> None:
    database = tmp_path / "old.db"
    url = f"sqlite:///{database}"
    config = Config()
    config.set_main_option("script_location", "db:migrations")
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "0005")
        with engine.begin() as connection:
            connection.exec_driver_sql("INSERT INTO repositories (path, name) VALUES ('/somewhere/repo', 'repo')")
        assert "verifications" not in inspect(engine).get_table_names()
    finally:
        engine.dispose()
    with Store.open(url) as store:
        assert store.repository(Path("/somewhere/repo")) == 1
        assert store.verification(1, "default", "p", "0" * 40) is None
