"""A `git bisect run` user's first hour on a repository of their own: an untracked check script
given as they would give it to git, no config, edits to the script, --fresh, --assume-ends,
scan and track with --command. Each runs the real CLI in the repository's directory, and where
git has an answer, `git bisect run` runs on the same repository to give it."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from cli_in import regtrack
from gitrepo import GitRepo

COMMITS = 40
CULPRIT = 27
"""The first commit whose value.txt makes the check fail."""

CHECK = 'test "$(cat value.txt)" -lt {limit}\n'


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)
    return tmp_path / "home"


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    """COMMITS commits, commit i writing i to value.txt; the check scripts stay untracked."""
    repo = GitRepo(tmp_path / "work")
    for i in range(COMMITS):
        repo.commit(f"value {i}", {"value.txt": f"{i}\n", "src/lib.py": f"VALUE = {i}\n"})
    (repo.path / ".git" / "info" / "exclude").write_text("check.sh\nbisect_check.py\n")
    write_check(repo, CULPRIT)
    return repo


def write_check(repo: GitRepo, limit: int) -> None:
    (repo.path / "check.sh").write_text(CHECK.format(limit=limit))
    (repo.path / "check.sh").chmod(0o755)
    (repo.path / "bisect_check.py").write_text(f"import sys\nsys.exit(int(open('value.txt').read()) >= {limit})\n")


def shas(repo: GitRepo) -> list[str]:
    return repo.git("rev-list", "--reverse", "HEAD").split()


def git_bisect_run(repo: GitRepo, good: str, bad: str, *command: str) -> tuple[str, int]:
    """git's culprit and its number of executions, in the work tree as a user runs it."""
    run = lambda *args: subprocess.run(["git", *args], cwd=repo.path, capture_output=True, text=True, check=False)  # noqa: E731
    run("bisect", "start", bad, good)
    done = run("bisect", "run", *command)
    run("bisect", "reset")
    found = re.search(r"^([0-9a-f]{40}) is the first bad commit", done.stdout, re.MULTILINE)
    assert found, done.stdout + done.stderr
    return found.group(1), done.stdout.count("\nrunning ") + done.stdout.startswith("running ")


def bisect_json(repo: GitRepo, *args: str) -> dict:
    result = regtrack("bisect", *args, "--json", cwd=repo.path)
    assert result.exit_code == 1, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("command", [("./check.sh",), ("sh", "check.sh"), ("python3", "bisect_check.py")])
def test_an_untracked_check_in_the_directory_finds_what_git_bisect_run_finds(
    repo: GitRepo, command: tuple[str, ...]
) -> None:
    line = shas(repo)
    git_culprit, git_executions = git_bisect_run(repo, line[0], line[-1], *command)
    assert git_culprit == line[CULPRIT]
    report = bisect_json(repo, "--good", line[0], "--bad", line[-1], "--command", " ".join(command))
    assert report["culprit"] == git_culprit
    # no flake in history: git's executions, plus the two ends regtrack checks
    assert report["executions"] <= git_executions + 2
    assert subprocess.run(["git", "status", "--porcelain"], cwd=repo.path, capture_output=True, text=True).stdout == ""


def test_with_assume_ends_a_bisect_spends_no_more_than_git(repo: GitRepo) -> None:
    line = shas(repo)
    _, git_executions = git_bisect_run(repo, line[0], line[-1], "./check.sh")
    report = bisect_json(repo, "--good", line[0], "--bad", line[-1], "--command", "./check.sh", "--assume-ends")
    assert report["culprit"] == line[CULPRIT] and report["executions"] <= git_executions
    assert line[0] not in [step["sha"] for step in report["steps"]]


def test_an_untestable_good_end_stops_a_bisect_unless_the_ends_are_assumed(repo: GitRepo) -> None:
    """git bisect never runs its ends; neither does --assume-ends, which then finds the culprit."""
    line = shas(repo)
    (repo.path / "check.sh").write_text('[ "$(cat value.txt)" = 0 ] && exit 125\n' + CHECK.format(limit=CULPRIT))
    stopped = regtrack("bisect", "--good", line[0], "--bad", line[-1], "--command", "./check.sh", cwd=repo.path)
    assert stopped.exit_code == 2 and "--good" in stopped.stderr and "--assume-ends" in stopped.stderr
    report = bisect_json(repo, "--good", line[0], "--bad", line[-1], "--command", "./check.sh", "--assume-ends")
    assert report["culprit"] == line[CULPRIT]


def test_editing_the_check_measures_afresh_and_nothing_else_does(repo: GitRepo, tmp_path: Path) -> None:
    head = shas(repo)[-1]
    first = regtrack("run", "--command", "./check.sh", head, "--json", cwd=repo.path)
    assert first.exit_code == 1 and json.loads(first.stdout)["rows"][0]["verdict"] == "bad"
    again = regtrack("run", "--command", "./check.sh", head, "--json", cwd=repo.path)
    assert json.loads(again.stdout)["rows"][0]["reused"]
    write_check(repo, COMMITS + 1)
    edited = regtrack("run", "--command", "./check.sh", head, "--json", cwd=repo.path)
    assert edited.exit_code == 0, edited.output
    assert [(row["verdict"], row["reused"]) for row in json.loads(edited.stdout)["rows"]] == [("good", False)]
    # the same script by an absolute path: its content, not its spelling, is what a result rests on
    outside = tmp_path / "x.sh"
    outside.write_text("exit 1\n")
    assert regtrack("run", "--command", f"sh {outside}", head, cwd=repo.path).exit_code == 1
    outside.write_text("exit 0\n")
    assert regtrack("run", "--command", f"sh {outside}", head, cwd=repo.path).exit_code == 0


def test_fresh_measures_again_and_keeps_both_results(repo: GitRepo) -> None:
    head = shas(repo)[-1]
    for flags in ((), ("--fresh",)):
        result = regtrack("run", "--command", "./check.sh", head, *flags, "--json", cwd=repo.path)
        assert [row["reused"] for row in json.loads(result.stdout)["rows"]] == [False]
    history = json.loads(regtrack("history", "--json", cwd=repo.path).stdout)["runs"]
    assert len([run for run in history if run["sha"] == head]) == 2


def test_a_fresh_bisect_measures_every_step_again(repo: GitRepo) -> None:
    line = shas(repo)
    first = bisect_json(repo, "--good", line[0], "--bad", line[-1], "--command", "./check.sh")
    stored = bisect_json(repo, "--good", line[0], "--bad", line[-1], "--command", "./check.sh")
    fresh = bisect_json(repo, "--good", line[0], "--bad", line[-1], "--command", "./check.sh", "--fresh")
    assert stored["executions"] == 0
    assert fresh["executions"] == first["executions"] and fresh["culprit"] == first["culprit"]
    assert not any(step["reused"] for step in fresh["steps"])


def test_a_repository_without_a_config_needs_a_command(repo: GitRepo) -> None:
    line = shas(repo)
    for args in (
        ("run", "HEAD"),
        ("scan", f"{line[0]}..HEAD"),
        ("bisect", "--good", line[0], "--bad", "HEAD"),
        ("track",),
    ):
        result = regtrack(*args, cwd=repo.path)
        assert result.exit_code == 2, (args, result.output)
        assert "no regtrack.toml" in result.stderr and "--command" in result.stderr and "regtrack init" in result.stderr
        with_json = regtrack(*args, "--json", cwd=repo.path)
        assert with_json.exit_code == 2 and "--command" in json.loads(with_json.stdout)["error"]


def test_scan_and_track_take_a_command(repo: GitRepo) -> None:
    line = shas(repo)
    scanned = regtrack("scan", f"{line[0]}..HEAD", "--command", "./check.sh", "--json", cwd=repo.path)
    assert scanned.exit_code == 1, scanned.output
    assert [(t["sha"], t["kind"]) for t in json.loads(scanned.stdout)["transitions"]] == [(line[CULPRIT], "regression")]
    tracked = regtrack("track", "--command", "./check.sh", "--json", cwd=repo.path)
    assert tracked.exit_code == 1, tracked.output


def test_scan_exits_3_when_nothing_in_the_range_could_be_judged(repo: GitRepo) -> None:
    result = regtrack("scan", "HEAD~3..HEAD", "--command", "sh -c 'exit 125'", cwd=repo.path)
    assert result.exit_code == 3, result.output


def test_repo_reads_that_repositorys_config_not_the_current_directorys(repo: GitRepo, tmp_path: Path) -> None:
    here = GitRepo(tmp_path / "here")
    here.commit("first", {"regtrack.toml": '[targets.here]\nrepo = "."\nprobes = ["swa_page_table"]\n'})
    result = regtrack("run", "--repo", str(repo.path), "HEAD", cwd=here.path)
    assert result.exit_code == 2 and f"{repo.path} has no regtrack.toml" in result.stderr


def test_init_writes_a_starter_config_that_runs_nothing_until_a_probe_is_written(repo: GitRepo) -> None:
    (repo.path / "docs").mkdir()
    written = regtrack("init", cwd=repo.path)
    assert written.exit_code == 0, written.output
    text = (repo.path / "regtrack.toml").read_text()
    assert 'paths = ["src", "value.txt"]' in text and "# [targets.work.probes.check]" in text
    listed = regtrack("run", "HEAD", cwd=repo.path)
    assert listed.exit_code == 2 and "lists no probes" in listed.stderr
    assert regtrack("init", cwd=repo.path).exit_code == 2  # never over an existing config
    (repo.path / "regtrack.toml").write_text(
        text.replace("# [targets", "[targets").replace('# command = "sh check.sh"', 'command = "sh check.sh"')
    )
    assert regtrack("run", "HEAD", cwd=repo.path).exit_code == 1
    assert regtrack("init", "sglang", "--print", cwd=repo.path).stdout.startswith("# regtrack's SGLang target")


def test_a_word_too_long_for_a_file_name_is_only_a_word(repo: GitRepo) -> None:
    script = "import sys; sys.exit(0)" + " " * 300 + "# long"
    result = regtrack("run", "--command", f"python3 -c '{script}'", "HEAD", cwd=repo.path)
    assert result.exit_code == 0, result.output


def test_a_repository_probed_by_command_alone_has_a_report(repo: GitRepo, tmp_path: Path) -> None:
    assert regtrack("run", "--command", "./check.sh", "HEAD", cwd=repo.path).exit_code == 1
    page = tmp_path / "report.html"
    result = regtrack("report", "--html", str(page), cwd=repo.path)
    assert result.exit_code == 0, result.output
    assert "command:" in page.read_text()


def test_run_says_why_a_revision_was_untestable_when_only_its_output_says_it(repo: GitRepo) -> None:
    result = regtrack("run", "--command", "sh -c 'echo no GPU here; exit 125'", "HEAD", "--json", cwd=repo.path)
    assert result.exit_code == 3
    assert json.loads(result.stdout)["rows"][0]["signature"] == "exit 125 (untestable)"
    module = repo.path / "skipping.py"
    module.write_text(
        "from probes.api import ProbeResult\n"
        "from tracker.core.verdicts import Outcome\n"
        "def check(ctx, params):\n    return ProbeResult(Outcome.SKIP, detail='needs a GPU: none visible\\nmore')\n"
    )
    (repo.path / "regtrack.toml").write_text(
        '[targets.t]\nrepo = "."\n[targets.t.probes.skipping]\nmodule = "skipping.py:check"\n'
    )
    listed = regtrack("run", "HEAD", "--json", cwd=repo.path)
    assert listed.exit_code == 3 and json.loads(listed.stdout)["rows"][0]["signature"] == "needs a GPU: none visible"
