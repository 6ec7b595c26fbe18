"""The demo history builder, checked on real repositories."""

from __future__ import annotations

import hashlib
import io
import os
import re
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from dataclasses import astuple, dataclass
from itertools import pairwise
from pathlib import Path

import pytest
from demo_histories import DemoHistories

from probes.loader import load_backend, purge
from tracker.demo.bugs import (
    BROKEN_IMPORT,
    DECODE_STALE_PAGE,
    SWA_PARTIAL_PAGE,
    TARGET_VERIFY_OVERWRITE,
    WHOLE_ROW_GATHER,
    Edit,
    apply_edits,
    read_tree,
)
from tracker.demo.history import DEFAULT_COMMITS, MIN_COMMITS, DemoManifest, StoryPlan, build_demo_history

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "make_demo_history.py"


def git(repo: Path, *args: str, stdin: str | None = None) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], input=stdin, capture_output=True, check=True, text=True
    ).stdout


def subject(repo: Path, sha: str) -> str:
    return git(repo, "log", "-1", "--format=%s", sha).strip()


def blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass(frozen=True)
class Demo:
    repo: Path
    commits: int
    manifest: DemoManifest

    def first_parent(self) -> list[str]:
        return git(self.repo, "rev-list", "--first-parent", "--reverse", "main").split()


@pytest.fixture(scope="module", params=[MIN_COMMITS, DEFAULT_COMMITS])
def demo(request: pytest.FixtureRequest, demo_histories: DemoHistories) -> Demo:
    repo, manifest = demo_histories.shared(request.param)
    return Demo(repo, request.param, manifest)


@pytest.fixture
def fresh_backend_modules() -> Iterator[None]:
    """Loading a revision's backend replaces ``backend`` in ``sys.modules``; forget it afterwards."""
    yield
    purge()


def test_two_builds_give_identical_shas_whatever_the_environment(
    demo: Demo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = Someone Else\n[core]\n\tautocrlf = true\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    monkeypatch.setenv("GIT_AUTHOR_DATE", "2001-01-01T00:00:00")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Someone Else")
    old_umask = os.umask(0o077)
    try:
        again = build_demo_history(tmp_path / "again", demo.commits)
    finally:
        os.umask(old_umask)
    assert again == demo.manifest
    assert git(tmp_path / "again", "rev-list", "--all") == git(demo.repo, "rev-list", "--all")


def test_head_holds_the_project_backend_and_a_clean_work_tree(demo: Demo) -> None:
    expected = read_tree(ROOT)
    assert git(demo.repo, "rev-parse", "HEAD").strip() == demo.manifest.head
    assert git(demo.repo, "ls-tree", "-r", "--name-only", "HEAD", "backend").split() == sorted(expected)
    assert read_tree(demo.repo) == expected
    assert git(demo.repo, "status", "--porcelain") == ""
    assert git(demo.repo, "for-each-ref", "--format=%(refname)") == "refs/heads/main\n"


def test_manifest_round_trips_through_json(demo: Demo) -> None:
    manifest = demo.manifest
    assert DemoManifest.from_json(manifest.to_json()) == manifest
    assert manifest.bugs[DECODE_STALE_PAGE.name].to_dict()["flaky"] is True
    assert set(manifest.bugs[SWA_PARTIAL_PAGE.name].to_dict()) == {"probe", "introduced", "fixed"}


def test_first_parent_line_has_the_requested_length_and_the_merges(demo: Demo) -> None:
    assert len(demo.first_parent()) == demo.manifest.commits == demo.commits
    merges = git(demo.repo, "rev-list", "--first-parent", "--merges", "--reverse", "main").split()
    assert merges == list(demo.manifest.merges) and len(merges) == 2
    for merge in merges:
        assert subject(demo.repo, merge).startswith("Merge pull request #")
        assert len(git(demo.repo, "rev-list", "--parents", "-n1", merge).split()) == 3


def planted_at(manifest: DemoManifest, position: dict[str, int], index: int) -> list[Edit]:
    """The edits the manifest says the first-parent commit at ``index`` carries."""
    tv, swa, decode = (manifest.bugs[b.name] for b in (TARGET_VERIFY_OVERWRITE, SWA_PARTIAL_PAGE, DECODE_STALE_PAGE))

    def within(start: str, end: str) -> bool:
        return position[start] <= index < position[end]

    carried = {
        BROKEN_IMPORT: within(manifest.untestable.first, manifest.untestable.mended),
        SWA_PARTIAL_PAGE.edit: within(swa.introduced, swa.fixed),
        TARGET_VERIFY_OVERWRITE.edit: within(tv.introduced, tv.fixed) or within(tv.reverted, tv.relanded),
        DECODE_STALE_PAGE.edit: within(decode.introduced, decode.fixed),
    }
    if manifest.slowdown is not None:
        carried[WHOLE_ROW_GATHER.edit] = within(manifest.slowdown.commit, manifest.slowdown.fix)
    return [edit for edit, present in carried.items() if present]


def test_every_first_parent_commit_carries_the_bugs_the_manifest_says(demo: Demo) -> None:
    """The bugs and the slowdown, file by file: the only files of ``backend`` the line changes."""
    line = demo.first_parent()
    position = {sha: index for index, sha in enumerate(line)}
    paths = {TARGET_VERIFY_OVERWRITE.edit.path, WHOLE_ROW_GATHER.edit.path}
    correct = read_tree(ROOT)
    for path in sorted(paths):
        stdin = "".join(f"{sha}:{path}\n" for sha in line)
        blobs = git(demo.repo, "cat-file", "--batch-check=%(objectname)", stdin=stdin)
        for index, actual in enumerate(blobs.split()):
            expected = apply_edits(correct, planted_at(demo.manifest, position, index))[path]
            assert actual == blob_id(expected), f"{path} at first-parent commit {index}"
    changed = git(demo.repo, "log", "--first-parent", "--format=", "--name-only", f"{line[0]}..main", "--", "backend")
    assert set(changed.split()) == paths


def test_the_revert_is_githubs_and_restores_the_bug_exactly(demo: Demo) -> None:
    repo, tv = demo.repo, demo.manifest.bugs[TARGET_VERIFY_OVERWRITE.name]
    assert tv.reverted is not None
    fix_subject = subject(repo, tv.fixed)
    fix = re.fullmatch(r"Fix TRTLLM target verify query metadata \(#(\d+)\)", fix_subject)
    revert = re.fullmatch(rf'Revert "{re.escape(fix_subject)}" \(#(\d+)\)', subject(repo, tv.reverted))
    assert fix and revert and int(revert[1]) > int(fix[1])
    assert git(repo, "log", "-1", "--format=%b", tv.reverted).strip() == f"This reverts commit {tv.fixed}."
    assert git(repo, "rev-parse", f"{tv.reverted}~2") == git(repo, "rev-parse", tv.fixed)
    assert git(repo, "rev-parse", f"{tv.reverted}:backend") == git(repo, "rev-parse", f"{tv.fixed}^:backend")


def test_the_reland_repeats_the_fix_byte_for_byte(demo: Demo) -> None:
    repo, tv = demo.repo, demo.manifest.bugs[TARGET_VERIFY_OVERWRITE.name]
    fix_diff = git(repo, "diff", f"{tv.fixed}^", tv.fixed, "--", "backend")
    assert "-" + TARGET_VERIFY_OVERWRITE.edit.new.splitlines()[-1] in fix_diff.splitlines()
    assert git(repo, "diff", f"{tv.relanded}^", tv.relanded, "--", "backend") == fix_diff
    assert subject(repo, tv.relanded).rsplit(" (#", 1)[0] == subject(repo, tv.fixed).rsplit(" (#", 1)[0]


def test_the_regression_hides_in_a_large_change(demo: Demo) -> None:
    introduced = demo.manifest.bugs[TARGET_VERIFY_OVERWRITE.name].introduced
    assert subject(demo.repo, introduced).startswith("[Spec v2] Draft-extend CUDA graphs for EAGLE (#")
    touched = git(demo.repo, "diff", "--name-only", f"{introduced}^", introduced).split()
    assert TARGET_VERIFY_OVERWRITE.edit.path in touched
    assert len([path for path in touched if not path.startswith("backend/")]) >= 4


def export(repo: Path, sha: str, dest: Path) -> Path:
    archive = subprocess.run(["git", "-C", str(repo), "archive", sha, "backend"], capture_output=True, check=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(dest, filter="data")
    return dest


@pytest.mark.usefixtures("fresh_backend_modules")
def test_the_untestable_stretch_cannot_import_backend(demo: Demo, tmp_path: Path) -> None:
    stretch = demo.manifest.untestable
    line = demo.first_parent()
    assert line.index(stretch.mended) - line.index(stretch.first) == 4
    for sha in (stretch.first, stretch.last):
        with pytest.raises(ImportError, match=r"kernels\.registry"):
            load_backend(export(demo.repo, sha, tmp_path / sha))
    assert load_backend(export(demo.repo, stretch.mended, tmp_path / stretch.mended)).PagedAttentionBackend


def test_story_keeps_its_order_and_stretches_at_every_size() -> None:
    for commits in [*range(MIN_COMMITS, 3000), 10_000, 1_000_000]:
        positions = astuple(StoryPlan.for_size(commits))[1:]
        assert positions[0] >= 2 and positions[-1] < commits - 1, commits
        assert all(later - earlier >= 2 for earlier, later in pairwise(positions)), commits


def test_too_few_commits_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=f"at least {MIN_COMMITS}"):
        build_demo_history(tmp_path / "repo", MIN_COMMITS - 1)
    assert not (tmp_path / "repo").exists()


def test_a_non_empty_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not an empty directory"):
        build_demo_history(tmp_path)
    assert [path.name for path in tmp_path.iterdir()] == ["notes.txt"]


@pytest.mark.slow
@pytest.mark.parametrize("commits", [DEFAULT_COMMITS, 10_000])
def test_builds_long_histories(tmp_path: Path, commits: int) -> None:
    manifest = build_demo_history(tmp_path / "repo", commits)
    assert git(tmp_path / "repo", "rev-list", "--first-parent", "--count", "main").strip() == str(commits)
    assert manifest.commits == commits


def run_script(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=cwd)


def test_script_builds_and_writes_the_manifest_beside_the_repository(tmp_path: Path) -> None:
    result = run_script("repo", "--commits", str(MIN_COMMITS), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    head, manifest_file = result.stdout.splitlines()
    assert Path(manifest_file) == tmp_path / "repo.manifest.json"
    manifest = DemoManifest.from_json(Path(manifest_file).read_text())
    assert manifest.head == head == git(tmp_path / "repo", "rev-parse", "HEAD").strip()
    assert manifest.commits == MIN_COMMITS


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["taken"], "is not an empty directory"),
        (["repo", "--manifest", "repo/manifest.json"], "must not be inside"),
        (["repo", "--commits", "10"], f"at least {MIN_COMMITS}"),
    ],
)
def test_script_exits_2_with_one_line_on_bad_input(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "file").write_text("x")
    result = run_script(*args, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and message in result.stderr
    assert not (tmp_path / "repo").exists()
