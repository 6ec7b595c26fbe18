"""A paste-ready issue for each regression: ``regtrack regressions --markdown`` and the files of
``track``, read back with a markdown parser (markdown-it-py, GitHub's table extension on), over
real git repositories, real SQLite and real probes; its git bisect lines run with git itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from demo_histories import DemoHistories
from gitrepo import GitRepo, git, git_env
from markdown_it import MarkdownIt
from markdown_it.token import Token

from tracker.cli.app import main
from tracker.report.issue_markdown import github_web_url

CHECK = """read code err < engine/value
printf '{"metrics": {"rel_err": %s}}' "$err" > "${REGTRACK_METRICS:-/dev/null}"
exit "$code"
"""
CONFIG = """[targets.engine]
repo = "."
paths = ["engine"]

[targets.engine.probes.precision]
command = ["sh", "engine/check.sh"]
"""
HOSTILE_SUBJECT = "Use `fast|path` for *speed* <b>now</b> [x](y) (#12)"
REMOTE = "git@github.com:acme/engine.git"


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)


def regtrack(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def parse(body: str) -> list[Token]:
    return MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(body)


def inline_text(token: Token) -> str:
    """What an inline token renders as text: its text and code spans, markup gone."""
    return "".join(child.content for child in token.children or [] if child.type in ("text", "code_inline"))


def tables(tokens: list[Token]) -> list[list[list[str]]]:
    """Each table as rows of cell texts, the header row first."""
    found: list[list[list[str]]] = []
    for position, token in enumerate(tokens):
        if token.type == "table_open":
            found.append([])
        elif token.type == "tr_open":
            found[-1].append([])
        elif token.type == "inline" and tokens[position - 1].type in ("th_open", "td_open"):
            found[-1][-1].append(inline_text(token))
    return found


def fences(tokens: list[Token]) -> list[str]:
    return [t.content for t in tokens if t.type == "fence" and t.info == "sh"]


def section(tokens: list[Token], title: str) -> list[str]:
    """The texts of the paragraphs and list items under the h2 ``title``."""
    start = next(i for i, t in enumerate(tokens) if t.type == "inline" and t.content == title)
    texts = []
    for token in tokens[start + 2 :]:
        if token.type == "heading_open" and token.tag == "h2":
            break
        if token.type == "inline":
            texts.append(inline_text(token))
    return texts


def engine_history(path: Path) -> tuple[GitRepo, dict[str, str]]:
    """A check that passes with a small error, then a commit under a subject full of markup that
    raises the error, and commits that touch only the docs; ``origin`` on GitHub."""
    repo = GitRepo(path)
    shas = {
        "good": repo.commit("Add the engine", {"engine/check.sh": CHECK, "engine/value": "0 0.001\n"}),
        "docs": repo.commit("Document the engine", {"docs/engine.md": "how\n"}),
        "culprit": repo.commit(HOSTILE_SUBJECT, {"engine/value": "1 0.5\n"}),
        "later": repo.commit("Document the fast path", {"docs/engine.md": "how, fast\n"}),
    }
    (path / "regtrack.toml").write_text(CONFIG)
    repo.git("remote", "add", "origin", REMOTE)
    return repo, shas


@pytest.fixture()
def engine(tmp_path: Path) -> tuple[GitRepo, dict[str, str]]:
    repo, shas = engine_history(tmp_path / "engine")
    scanned = regtrack("scan", "--repo", str(repo.path), "--verify")
    assert scanned.exit_code == 1, scanned.output
    return repo, shas


def test_the_issue_names_the_culprit_with_links_its_metrics_and_its_verification(
    engine: tuple[GitRepo, dict[str, str]],
) -> None:
    repo, shas = engine
    culprit = shas["culprit"]
    result = regtrack("regressions", "--repo", str(repo.path), "--open", "--markdown")
    assert result.exit_code == 0, result.output
    tokens = parse(result.stdout)

    assert tokens[0].type == "heading_open" and tokens[0].tag == "h1"
    assert inline_text(tokens[1]) == f"precision regressed by {culprit[:12]}: {HOSTILE_SUBJECT}"
    links = {t.attrs["href"] for t in tokens for t in t.children or [] if t.type == "link_open"}
    assert f"https://github.com/acme/engine/commit/{culprit}" in links
    assert "https://github.com/acme/engine/pull/12" in links
    # the subject's markup stays text: no HTML, emphasis or link of its own
    assert all(href.startswith("https://github.com/acme/engine/") for href in links)
    assert not {t.type for t in tokens} & {"html_block"}
    subject = next(t for t in tokens if t.type == "inline" and inline_text(t).startswith("subject: "))
    assert inline_text(subject) == f"subject: {HOSTILE_SUBJECT}"
    assert {child.type for child in subject.children or []} == {"text"}
    assert {child.type for child in tokens[1].children or []} == {"text", "code_inline"}

    failures, metrics = tables(tokens)
    assert all(len(row) == len(failures[0]) for row in failures)
    assert failures[1][:2] == ["precision", "command"] and failures[1][-1] == "exit 1"
    assert metrics[0] == ["case", "metric", f"parent {shas['docs'][:12]}", f"culprit {culprit[:12]}"]
    assert ["command", "rel_err", "0.001", "0.5"] in metrics
    assert ["command", "outcome", "pass", "fail"] in metrics

    assert section(tokens, "Verification")[0].startswith("confirmed: ")
    run, by_hand = fences(tokens)
    assert run.strip() == f"regtrack run '{culprit[:12]}^' {culprit[:12]} --probe precision"
    assert f"--detach {culprit[:12]} && sh engine/check.sh;" in by_hand
    assert f"git bisect start {culprit[:12]} G && git bisect run sh engine/check.sh" in bisect_line(tokens)


def test_the_git_lines_check_both_commits_and_bisect_to_the_culprit(engine: tuple[GitRepo, dict[str, str]]) -> None:
    repo, shas = engine
    tokens = parse(regtrack("regressions", "--repo", str(repo.path), "--markdown").stdout)
    ran = shell(repo.path, fences(tokens)[1].splitlines())
    assert "parent: exit 0 (0 is good)" in ran.stdout and "culprit: exit 1 " in ran.stdout, ran.stdout + ran.stderr
    assert git(repo.path, "symbolic-ref", "--short", "HEAD").strip() == "main", "back on the branch"
    bisect = bisect_line(tokens).replace(" G ", f" {shas['good']} ")
    ran = shell(repo.path, [bisect, "git bisect reset"])
    assert f"{shas['culprit']} is the first bad commit" in ran.stdout, ran.stdout + ran.stderr


def test_out_writes_one_file_per_issue_named_by_probe_and_commit(
    engine: tuple[GitRepo, dict[str, str]], tmp_path: Path
) -> None:
    repo, shas = engine
    printed = regtrack("regressions", "--repo", str(repo.path), "--open", "--markdown").stdout
    out = tmp_path / "issues"
    result = regtrack("regressions", "--repo", str(repo.path), "--open", "--markdown", "--out", str(out))
    assert result.exit_code == 0, result.output
    written = tmp_path / "issues" / f"regression-precision-{shas['culprit'][:12]}.md"
    assert result.stdout.strip() == str(written)
    assert written.read_text() == printed


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (("--out", "issues"), "--out writes the issues of --markdown; add --markdown"),
        (("--markdown", "--json"), "give --markdown or --json, not both"),
        (("--markdown", "--out", "afile"), "is a file; name a directory"),
    ],
)
def test_bad_options_are_exit_2_in_one_line(tmp_path: Path, args: tuple[str, ...], complaint: str) -> None:
    repo = GitRepo(tmp_path / "repo")
    repo.commit("Add a file", {"file.txt": "1\n"})
    (tmp_path / "afile").write_text("")
    options = [str(tmp_path / arg) if arg in ("issues", "afile") else arg for arg in args]
    result = regtrack("regressions", "--repo", str(repo.path), *options)
    assert result.exit_code == 2
    assert complaint in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_no_open_regression_prints_nothing_and_says_so(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "repo")
    repo.commit("Add a file", {"file.txt": "1\n"})
    result = regtrack("regressions", "--repo", str(repo.path), "--open", "--markdown")
    assert result.exit_code == 0 and result.stdout == ""
    assert "no open regression stored" in result.stderr


def test_track_writes_an_issue_for_each_new_regression(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "engine")
    repo.commit("Add the engine", {"engine/check.sh": CHECK, "engine/value": "0 0.001\n"})
    (repo.path / "regtrack.toml").write_text(CONFIG)
    out = tmp_path / "reports"
    assert regtrack("track", "--repo", str(repo.path), "--out", str(out)).exit_code == 0
    culprit = repo.commit("Lose precision (#7)", {"engine/value": "1 0.5\n"})
    assert regtrack("track", "--repo", str(repo.path), "--out", str(out)).exit_code == 1
    issue = (out / f"regression-precision-{culprit[:12]}.md").read_text()
    tokens = parse(issue)
    assert inline_text(tokens[1]) == f"precision regressed by {culprit[:12]}: Lose precision (#7)"
    assert ["command", "rel_err", "0.001", "0.5"] in tables(tokens)[1]
    assert section(tokens, "Verification")[0].startswith("confirmed: ")


@pytest.mark.parametrize(
    ("url", "web"),
    [
        ("git@github.com:acme/engine.git", "https://github.com/acme/engine"),
        ("ssh://git@github.com/acme/engine.git", "https://github.com/acme/engine"),
        ("https://github.com/acme/engine.git", "https://github.com/acme/engine"),
        ("https://token@github.com/acme/engine", "https://github.com/acme/engine"),
        ("git://github.com/acme/engine.js.git", "https://github.com/acme/engine.js"),
        ("https://gitlab.com/acme/engine.git", None),
        ("/srv/git/engine.git", None),
        (None, None),
    ],
)
def test_github_remotes_become_web_links_and_others_none(url: str | None, web: str | None) -> None:
    assert github_web_url(url) == web


@pytest.mark.slow
def test_the_seeds_reverted_fix_reads_as_a_re_introduced_bug_with_stored_metrics(
    tmp_path: Path, demo_histories: DemoHistories
) -> None:
    """Scan the demo from just before the fix to the revert that undoes it: the open regression's
    issue tells what it re-introduces, its verification, and the metrics stored at both ends."""
    repo = tmp_path / "demo"
    bug = demo_histories.copy(60, repo).bugs["target_verify_overwrite"]
    assert bug.reverted is not None
    scanned = regtrack(
        "scan", f"{bug.fixed}^..{bug.reverted}", "--repo", str(repo), "--probe", bug.probe, "--seed", "0", "--verify"
    )
    assert scanned.exit_code == 1, scanned.output
    tokens = parse(regtrack("regressions", "--repo", str(repo), "--open", "--markdown").stdout)

    assert inline_text(tokens[1]).startswith(f"{bug.probe} regressed by {bug.reverted[:12]}: Revert ")
    history = section(tokens, "History")
    assert history[0].startswith(f"This re-introduces what {bug.fixed[:12]} fixed: it reverts ")
    assert section(tokens, "Verification")[0].startswith("confirmed: ")
    metrics = tables(tokens)[1]
    for run in stored_runs(repo, bug.reverted, bug.probe):
        for name, value in run["metrics"].items():
            assert metrics_row(metrics, run["case_id"], name)[3] == f"{value:.4g}"
    run_line, by_hand = fences(tokens)
    assert run_line.strip() == f"regtrack run '{bug.reverted[:12]}^' {bug.reverted[:12]} --probe {bug.probe}"
    ran = shell(repo, by_hand.splitlines())
    assert "parent: exit 0 (0 is good)" in ran.stdout and "culprit: exit 1 " in ran.stdout, ran.stdout + ran.stderr


@pytest.mark.slow
def test_regtracks_untestable_reaches_git_as_125(tmp_path: Path, demo_histories: DemoHistories) -> None:
    """The check git runs for a probe only regtrack runs maps ``regtrack run``'s 3 (no probe could
    judge) to git bisect's 125 (skip)."""
    repo = tmp_path / "demo"
    manifest = demo_histories.copy(60, repo)
    bug = manifest.bugs["target_verify_overwrite"]
    scanned = regtrack("scan", f"{bug.introduced}^..{bug.introduced}", "--repo", str(repo), "--probe", bug.probe)
    assert scanned.exit_code == 1, scanned.output
    body = regtrack("regressions", "--repo", str(repo), "--markdown").stdout
    _, at_culprit, back = fences(parse(body))[1].splitlines()
    at_untestable = at_culprit.replace(bug.introduced[:12], manifest.untestable.first)
    ran = shell(repo, [at_untestable, back])
    assert "culprit: exit 125 " in ran.stdout, ran.stdout + ran.stderr


def bisect_line(tokens: list[Token]) -> str:
    return next(c.content for t in tokens for c in t.children or [] if c.content.startswith("git bisect start"))


def shell(repo: Path, lines: list[str]) -> subprocess.CompletedProcess[str]:
    """The lines run by a shell in ``repo``, with this interpreter's ``regtrack`` first on the PATH."""
    env = {**git_env(), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(["sh", "-c", "\n".join(lines)], cwd=repo, env=env, capture_output=True, text=True)


def stored_runs(repo: Path, sha: str, probe: str) -> list[dict]:
    """The newest stored run of each case of ``probe`` at ``sha``."""
    shown = json.loads(regtrack("show", sha, "--repo", str(repo), "--json").stdout)
    newest: dict[str, dict] = {}
    for run in shown["runs"]:
        if run["probe_name"] == probe and run["sha"] == sha:
            newest.setdefault(run["case_id"], run)
    return list(newest.values())


def metrics_row(metrics: list[list[str]], case: str, name: str) -> list[str]:
    return next(row for row in metrics if row[:2] == [case, name])
