"""Inputs that a user's machine or a repository can hold and regtrack must take in its stride:
git settings that change what git prints, and commit subjects that a terminal would act on."""

from __future__ import annotations

import io
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from gitrepo import GitRepo, git
from rich.console import Console

from tracker.cli import render
from tracker.cli.app import main
from tracker.core.measurements import CaseOutcome, Measurement
from tracker.core.records import CommitInfo
from tracker.core.verdicts import Outcome, Verdict
from tracker.probing import MeasuredRow
from tracker.search.pairing import Pair, pair_transitions
from tracker.targets.revisions import Repo

PATHS = ("backend",)
ENGINE = "".join(f"line {i}\n" for i in range(12))
FIXED = ENGINE.replace("line 6\n", "line 6 fixed\n")
HOSTILE_CONFIG = {
    "color.ui": "always",
    "log.showSignature": "true",
    "diff.noprefix": "true",
    "diff.mnemonicPrefix": "true",
    "diff.relative": "true",
    "core.quotePath": "false",
}
# Sets the terminal's title, clears the screen, and holds what rich markup reads as a closing tag.
TERMINAL_SUBJECT = "Mount \x1b]0;pwned\x07[/dev/shm]\x1b[2J early (#7)"


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> GitRepo:
    """c0, a fix (which also adds a file with a non-ASCII name), a docs change, the fix's revert
    with GitHub's message, and a re-land of the same patch under another subject."""
    repo = GitRepo(tmp_path_factory.mktemp("clean") / "repo")
    repo.commit("Initial import", {"backend/engine.py": ENGINE, "docs/readme.md": "hi\n"})
    fix = repo.commit("Fix the cache key (#10)", {"backend/engine.py": FIXED, "backend/café.py": "x = 1\n"})
    repo.commit("Document the cache (#11)", {"docs/readme.md": "hello\n"})
    repo.commit(
        f'Revert "Fix the cache key (#10)" (#12)\n\nThis reverts commit {fix}.',
        {"backend/engine.py": ENGINE, "backend/café.py": None},
    )
    repo.commit(
        "Key the cache by page size, with a test (#13)", {"backend/engine.py": FIXED, "backend/café.py": "x = 1\n"}
    )
    return repo


@pytest.fixture(scope="module")
def hostile(clean: GitRepo, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same repository, configured the way that breaks parsers of git's porcelain output."""
    folder = tmp_path_factory.mktemp("hostile")
    path = folder / "repo"
    shutil.copytree(clean.path, path)
    for key, value in {**HOSTILE_CONFIG, "diff.external": str(garbage_program(folder))}.items():
        git(path, "config", key, value)
    return path


def garbage_program(folder: Path) -> Path:
    """A diff program that prints no diff at all."""
    program = folder / "garbage-diff"
    program.write_text("#!/bin/sh\necho 'this is not a diff'\n")
    program.chmod(0o755)
    return program


def line_of(path: Path) -> list[str]:
    return git(path, "rev-list", "--first-parent", "--reverse", "main").split()


def pairs(repo: Repo) -> dict[int, Pair]:
    """Pairing as `regtrack scan` does it, with a transition at every commit that changes backend."""
    line = line_of(repo.path)
    trees = repo.tree_hashes(line, PATHS)
    return pair_transitions(
        repo.commit_infos(line), [trees[sha] for sha in line], [1, 3, 4], lambda sha: repo.patch_id(sha, PATHS)
    )


def test_patch_ids_ignore_colour_prefixes_quoting_and_an_external_diff(clean: GitRepo, hostile: Path) -> None:
    line = line_of(clean.path)
    assert line_of(hostile) == line
    expected = [Repo(clean.path).patch_id(sha, PATHS) for sha in line[1:]]
    assert [Repo(hostile).patch_id(sha, PATHS) for sha in line[1:]] == expected
    fix, docs, revert, reland = expected
    assert fix is not None and fix == reland and docs is None and revert not in (None, fix)


def test_metadata_ranges_and_trees_are_unchanged_by_the_config(clean: GitRepo, hostile: Path) -> None:
    mild, harsh = Repo(clean.path), Repo(hostile)
    line = line_of(clean.path)
    assert harsh.commit_infos(line) == mild.commit_infos(line)
    assert [info.subject for info in harsh.commit_infos(line)][3] == 'Revert "Fix the cache key (#10)" (#12)'
    assert harsh.first_parent_range(line[0], "main") == mild.first_parent_range(line[0], "main") == line[1:]
    assert harsh.first_parent_history("main") == line
    assert harsh.tree_hashes(line, PATHS) == mild.tree_hashes(line, PATHS)
    assert harsh.is_ancestor(line[0], "main") and not harsh.is_ancestor("main", line[0])


def test_the_revert_and_the_reland_pair_as_with_a_clean_config(clean: GitRepo, hostile: Path) -> None:
    fix = line_of(clean.path)[1]
    expected = {3: Pair(fix, "reverts"), 4: Pair(fix, "relands")}
    assert pairs(Repo(clean.path)) == expected
    assert pairs(Repo(hostile)) == expected


def test_git_environment_variables_do_not_shape_the_diff(
    clean: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = Repo(clean.path)
    line = line_of(clean.path)
    expected = [repo.patch_id(sha, PATHS) for sha in line[1:]]
    monkeypatch.setenv("GIT_EXTERNAL_DIFF", str(garbage_program(tmp_path)))
    monkeypatch.setenv("GIT_DIFF_OPTS", "--unified=0")
    monkeypatch.setenv("GIT_PAGER", str(garbage_program(tmp_path)))
    assert [repo.patch_id(sha, PATHS) for sha in line[1:]] == expected
    assert pairs(repo) == {3: Pair(line[1], "reverts"), 4: Pair(line[1], "relands")}


def test_patch_ids_see_the_bytes_of_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    """Two changes that differ only in Latin-1 bytes are two patches, not a re-land of one."""
    repo = GitRepo(tmp_path / "repo")
    shas = []
    for letter in (b"\xe9", b"\xe8", b"\xe0"):
        (repo.path / "backend").mkdir(exist_ok=True)
        (repo.path / "backend" / "names.py").write_bytes(b"name = 'caf" + letter + b"'\n")
        shas.append(repo.commit(f"Spell it with {letter!r}"))
    first, second = (Repo(repo.path).patch_id(sha, PATHS) for sha in shas[1:])
    assert first is not None and second is not None and first != second


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs ssh-keygen to sign a commit")
def test_a_signed_commit_reads_the_same_with_log_show_signature(tmp_path: Path) -> None:
    key = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    repo = GitRepo(tmp_path / "repo")
    first = repo.commit("Initial import", {"backend/engine.py": ENGINE})
    repo.write({"backend/engine.py": FIXED})
    repo.git("add", "--all")
    repo.git("-c", "gpg.format=ssh", "-c", f"user.signingKey={key}", "commit", "--quiet", "-S", "-m", "Signed fix (#2)")
    signed = repo.head()
    assert "gpgsig" in repo.git("cat-file", "commit", signed)
    for setting, value in HOSTILE_CONFIG.items():
        repo.git("config", setting, value)
    infos = Repo(repo.path).commit_infos([first, signed])
    assert [(info.sha, info.subject, info.pr_number) for info in infos] == [
        (first, "Initial import", None),
        (signed, "Signed fix (#2)", 2),
    ]


def test_show_spells_out_the_control_characters_of_a_subject(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)
    repo = GitRepo(tmp_path / "repo")
    repo.commit(TERMINAL_SUBJECT, {"backend/engine.py": ENGINE})
    result = CliRunner().invoke(main, ["show", "HEAD", "--repo", str(repo.path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "Mount \\x1b]0;pwned\\x07[/dev/shm]\\x1b[2J early (#7)" in result.stdout


def test_tables_show_a_subject_as_text_not_as_rich_markup() -> None:
    commit = CommitInfo(
        "c" * 40,
        ("p" * 40,),
        TERMINAL_SUBJECT + " [bold]loud[/bold]",
        "A <a@example.com>",
        datetime.now(UTC),
        7,
    )
    failing = CaseOutcome("case", Outcome.FAIL, "[link=https://example.com]x[/link]", {})
    row = MeasuredRow.of(
        commit, "swa_page_table", Measurement(commit.sha, "t" * 40, Verdict.BAD, (failing,), reused=False)
    )
    screen = io.StringIO()
    Console(file=screen, width=400, force_terminal=True).print(render.measurements_table([row]))
    shown = screen.getvalue()
    assert "Mount \\x1b]0;pwned\\x07[/dev/shm]\\x1b[2J early (#7) [bold]lo" in shown
    assert "[link=https://example.com]x[/link]" in shown and "\x1b]8;" not in shown
