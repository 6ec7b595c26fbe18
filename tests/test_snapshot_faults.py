"""Snapshots under attack or failure: export attributes, hostile trees, full disks, killed writers, edits."""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from gitrepo import GitRepo, git_env

from tracker.core.errors import UsageError
from tracker.targets.revisions import Repo
from tracker.targets.snapshots import LOCK_NAME, TEMP_PREFIX, SnapshotCache, manifest_path, modified_file

BACKEND = ("backend",)
ROOT = Path(__file__).resolve().parent.parent
DISK_FIX = "free space, run `regtrack gc`, or set REGTRACK_HOME to another disk"


def committed(work: GitRepo, rev: str) -> dict[str, bytes]:
    """Every regular file under backend/ at ``rev``, as ``git cat-file blob`` gives it."""
    listing = work.git("ls-tree", "-r", "-z", "--full-tree", rev, "--", "backend").split("\0")
    files = {}
    for line in filter(None, listing):
        info, path = line.split("\t", 1)
        mode, _, oid = info.split()
        if mode.startswith("100"):
            command = ["git", "-C", str(work.path), "cat-file", "blob", oid]
            files[path] = subprocess.run(command, capture_output=True, check=True).stdout
    return files


def written(snapshot: Path) -> dict[str, bytes]:
    return {
        path.relative_to(snapshot).as_posix(): path.read_bytes()
        for path in sorted(snapshot.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


def cache_entries(cache: SnapshotCache) -> list[str]:
    return sorted(entry.name for entry in cache.root.iterdir() if entry.name != LOCK_NAME)


def make_tree(work: GitRepo, entries: list[tuple[bytes, bytes, str]]) -> str:
    """A tree object written as given, names unchecked: what a hostile push could carry."""
    data = b"".join(mode + b" " + name + b"\0" + bytes.fromhex(oid) for mode, name, oid in entries)
    command = ["git", "-C", str(work.path), "hash-object", "-w", "-t", "tree", "--literally", "--stdin"]
    return subprocess.run(command, input=data, capture_output=True, check=True).stdout.decode().strip()


def blob(work: GitRepo, text: str) -> str:
    command = ["git", "-C", str(work.path), "hash-object", "-w", "--stdin"]
    return subprocess.run(command, input=text.encode(), capture_output=True, check=True).stdout.decode().strip()


def commit_tree(work: GitRepo, tree: str) -> str:
    command = ["git", "-C", str(work.path), "commit-tree", "-m", "hostile", tree]
    return subprocess.run(command, capture_output=True, check=True, text=True, env=git_env(1767603600)).stdout.strip()


def rewrite(path: Path, text: str) -> None:
    """Edit a read-only file as its owner would, leaving its mode as it was."""
    mode = stat.S_IMODE(path.stat().st_mode)
    path.chmod(mode | stat.S_IWUSR)
    path.write_text(text)
    path.chmod(mode)


@contextmanager
def writable(directory: Path) -> Iterator[None]:
    """Open a read-only directory to its owner for a moment, as a revision's own code might."""
    mode = stat.S_IMODE(directory.stat().st_mode)
    directory.chmod(mode | stat.S_IWUSR)
    try:
        yield
    finally:
        directory.chmod(mode)


@pytest.fixture
def attributed(tmp_path: Path) -> GitRepo:
    """HEAD~1 without attributes; HEAD adds ones that git archive applies, leaving backend/'s tree as it was."""
    work = GitRepo(tmp_path / "work")
    work.commit(
        "code",
        {
            "backend/a.py": "a = 1\n",
            "backend/kernels/attention.cu": "// kernel\n",
            "backend/kernels/deep/rope.cu": "// rope\n",
            "backend/version.py": "COMMIT = '$Format:%H$'\n",
            "backend/ident.py": "ID = '$Id$'\n",
            "backend/notes.txt": "one\ntwo\n",
        },
    )
    attributes = "backend/kernels/** export-ignore\nbackend/version.py export-subst\n*.py ident\n*.txt eol=crlf\n"
    work.commit("attributes", {".gitattributes": attributes})
    return work


def test_export_attributes_do_not_change_a_snapshot(attributed: GitRepo, tmp_path: Path) -> None:
    cache = SnapshotCache(tmp_path / "cache")
    repo = Repo(attributed.path)
    for rev in ("HEAD", "HEAD~1"):
        snapshot = cache.materialise(repo, rev, BACKEND)
        assert written(snapshot) == committed(attributed, rev)
    assert len(cache.snapshots()) == 1


def test_modes_symlinks_and_submodules_as_committed(tmp_path: Path) -> None:
    work = GitRepo(tmp_path / "work")
    work.write({"backend/a.py": "a = 1\n", "backend/run.sh": "#!/bin/sh\n", "backend/deep/b.py": "b\n"})
    (work.path / "backend" / "run.sh").chmod(0o755)
    (work.path / "backend" / "link.py").symlink_to("a.py")
    (work.path / "backend" / "deep" / "up").symlink_to("../run.sh")
    work.git("add", "--all")
    work.git("update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},backend/vendor")
    work.git("commit", "--quiet", "-m", "all kinds")
    snapshot = SnapshotCache(tmp_path / "cache").materialise(Repo(work.path), "HEAD", BACKEND)
    backend = snapshot / "backend"
    assert written(snapshot) == committed(work, "HEAD")
    assert os.readlink(backend / "link.py") == "a.py" and os.readlink(backend / "deep" / "up") == "../run.sh"
    assert (backend / "vendor").is_dir() and list((backend / "vendor").iterdir()) == []
    modes = {path.relative_to(snapshot).as_posix(): stat.S_IMODE(path.lstat().st_mode) for path in snapshot.rglob("*")}
    assert {path: mode for path, mode in modes.items() if not (snapshot / path).is_symlink()} == {
        "backend": 0o555,
        "backend/a.py": 0o444,
        "backend/run.sh": 0o555,
        "backend/deep": 0o555,
        "backend/deep/b.py": 0o444,
        "backend/vendor": 0o555,
    }
    assert stat.S_IMODE(snapshot.stat().st_mode) == 0o555
    manifest = json.loads(manifest_path(snapshot).read_text())
    files = {f"backend/{name}" for name in ("a.py", "run.sh", "link.py", "deep/b.py", "deep/up")}
    assert set(manifest) == files | {"backend", "backend/deep", "backend/vendor"}
    info = (backend / "run.sh").stat()
    assert manifest["backend/run.sh"] == [info.st_size, info.st_mtime_ns, info.st_mode]


@pytest.mark.parametrize(
    ("links", "culprit"),
    [
        ({"out": "../../outside"}, "backend/out"),
        ({"a": "z/../..", "z": "."}, "backend/a"),
    ],
    ids=["climbs-out", "climbs-out-through-another-link"],
)
def test_symlinks_out_of_the_snapshot(tmp_path: Path, links: dict[str, str], culprit: str) -> None:
    work = GitRepo(tmp_path / "work")
    work.write({"backend/a.py": "a\n"})
    for name, pointee in links.items():
        (work.path / "backend" / name).unlink(missing_ok=True)
        (work.path / "backend" / name).symlink_to(pointee)
    sha = work.commit("links")
    cache = SnapshotCache(tmp_path / "cache")
    with pytest.raises(UsageError, match=rf"^cannot materialise {sha[:12]} of .*: tree entry '{culprit}' is unsafe; "):
        cache.materialise(Repo(work.path), "HEAD", BACKEND)
    assert cache_entries(cache) == []


HOSTILE = [b"..", b".", b".git", b".GIT", b"a/b", b"/etc", b""]


@pytest.mark.parametrize("name", HOSTILE, ids=[name.decode() or "empty" for name in HOSTILE])
def test_hostile_tree_entries_are_refused_before_anything_is_written(tmp_path: Path, name: bytes) -> None:
    work = GitRepo(tmp_path / "work")
    work.commit("start", {"README": "r\n"})
    content = blob(work, "x\n")
    inner = make_tree(work, [(b"100644", b"a.py", content), (b"100644", name, content)])
    sha = commit_tree(work, make_tree(work, [(b"40000", b"backend", inner)]))
    cache = SnapshotCache(tmp_path / "cache")
    shown = re.escape(repr("backend/" + name.decode())[1:-1])
    pattern = rf"^cannot materialise {sha[:12]} of {re.escape(str(work.path))}: tree entry '{shown}' is unsafe; [^\n]+$"
    with pytest.raises(UsageError, match=pattern):
        cache.materialise(Repo(work.path), sha, BACKEND)
    assert cache_entries(cache) == []


def test_nested_dot_dot_trees_write_nothing_outside(tmp_path: Path) -> None:
    work = GitRepo(tmp_path / "work")
    work.commit("start", {"README": "r\n"})
    escape = make_tree(work, [(b"100644", b"escaped", blob(work, "gotcha\n"))])
    climb = make_tree(work, [(b"40000", b"..", make_tree(work, [(b"40000", b"..", escape)]))])
    sha = commit_tree(work, make_tree(work, [(b"40000", b"backend", climb)]))
    cache = SnapshotCache(tmp_path / "cache")
    with pytest.raises(UsageError, match=r"tree entry 'backend/\.\.' is unsafe"):
        cache.materialise(Repo(work.path), sha, BACKEND)
    assert [path for path in tmp_path.rglob("escaped")] == []
    assert cache_entries(cache) == []


def test_a_dot_git_entry_in_a_whole_repository_snapshot(tmp_path: Path) -> None:
    work = GitRepo(tmp_path / "work")
    work.commit("start", {"README": "r\n"})
    config = make_tree(work, [(b"100644", b"config", blob(work, "[core]\n"))])
    sha = commit_tree(work, make_tree(work, [(b"40000", b".git", config)]))
    with pytest.raises(UsageError, match=r"tree entry '\.git' is unsafe"):
        SnapshotCache(tmp_path / "cache").materialise(Repo(work.path), sha, (".",))


def big_repo(tmp_path: Path) -> GitRepo:
    work = GitRepo(tmp_path / "work")
    work.commit("big", {"backend/a.py": "a\n", "backend/weights.txt": "w" * 65536})
    return work


CHILD = """
import os, resource, signal, sys
from pathlib import Path
from tracker.core.errors import UsageError
from tracker.targets.revisions import Repo
from tracker.targets.snapshots import SnapshotCache
{setup}
try:
    SnapshotCache(Path(sys.argv[2])).materialise(Repo(Path(sys.argv[1])), "HEAD", ("backend",))
except UsageError as error:
    print(error)
    sys.exit(2)
"""


def child(work: GitRepo, cache: SnapshotCache, setup: str) -> subprocess.Popen[str]:
    script = CHILD.format(setup=textwrap.dedent(setup))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-c", script, str(work.path), str(cache.root)]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_write_past_the_file_size_limit_is_one_line(tmp_path: Path) -> None:
    work = big_repo(tmp_path)
    cache = SnapshotCache(tmp_path / "cache")
    setup = """
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
    """
    stdout, stderr = child(work, cache, setup).communicate(timeout=60)
    expected = f"file too large while materialising {work.head()[:12]} into {cache.root}; {DISK_FIX}\n"
    assert (stdout, stderr) == (expected, "")
    assert cache_entries(cache) == []


def test_no_space_left_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = big_repo(tmp_path)
    cache = SnapshotCache(tmp_path / "cache")
    real_write = os.write

    def full_disk(descriptor: int, data: bytes) -> int:
        if stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(descriptor, data)

    monkeypatch.setattr(os, "write", full_disk)
    expected = f"no space left on device while materialising {work.head()[:12]} into {cache.root}; {DISK_FIX}"
    with pytest.raises(UsageError) as raised:
        cache.materialise(Repo(work.path), "HEAD", BACKEND)
    assert str(raised.value) == expected
    assert cache_entries(cache) == []


def test_a_killed_extraction_is_cleaned_by_the_next_materialise(tmp_path: Path) -> None:
    work = big_repo(tmp_path)
    cache = SnapshotCache(tmp_path / "cache")
    setup = """
        import stat, time
        real_write = os.write
        def stall(descriptor, data):
            if stat.S_ISREG(os.fstat(descriptor).st_mode):
                print("writing", flush=True)
                time.sleep(60)
            return real_write(descriptor, data)
        os.write = stall
    """
    writer = child(work, cache, setup)
    assert writer.stdout is not None and writer.stdout.readline() == "writing\n"
    assert [name.startswith(f"{TEMP_PREFIX}{writer.pid}-") for name in cache_entries(cache)] == [True]
    writer.send_signal(signal.SIGKILL)
    writer.communicate(timeout=60)
    snapshot = SnapshotCache(cache.root).materialise(Repo(work.path), "HEAD", BACKEND)
    assert written(snapshot) == committed(work, "HEAD")
    assert cache_entries(cache) == [snapshot.name, manifest_path(snapshot).name]


def test_temporaries_go_once_their_process_is_gone_or_they_are_stale(tmp_path: Path) -> None:
    work = big_repo(tmp_path)
    cache = SnapshotCache(tmp_path / "cache")
    cache.root.mkdir()
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = cache.root / f"{TEMP_PREFIX}{finished.stdout.strip()}-dead"
    old = cache.root / f"{TEMP_PREFIX}{os.getpid()}-old"
    live = cache.root / f"{TEMP_PREFIX}{os.getpid()}-live"
    for temporary in (dead, old, live):
        temporary.mkdir()
        (temporary / "part").write_text("partial")
        temporary.chmod(0o555)
    os.utime(old, (0, 0))
    cache.materialise(Repo(work.path), "HEAD", BACKEND)
    assert not dead.exists() and not old.exists() and live.exists()
    again = cache.root / f"{TEMP_PREFIX}{finished.stdout.strip()}-again"
    again.mkdir()
    cache.materialise(Repo(work.path), "HEAD", BACKEND)
    assert again.exists(), "one sweep per cache object: materialise stays cheap"
    assert cache.gc(max_bytes=None, max_age_s=None).removed_temporaries == 1
    assert not again.exists() and live.exists()


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    work = GitRepo(tmp_path / "work")
    work.write({"backend/a.py": "a = 1\n", "backend/run.sh": "#!/bin/sh\n"})
    (work.path / "backend" / "run.sh").chmod(0o755)
    (work.path / "backend" / "link.py").symlink_to("a.py")
    work.commit("one")
    return SnapshotCache(tmp_path / "cache").materialise(Repo(work.path), "HEAD", BACKEND)


def test_modified_file_sees_edits_deletions_and_new_files(snapshot: Path) -> None:
    backend = snapshot / "backend"
    assert modified_file(snapshot) is None
    with writable(backend):
        (backend / "__pycache__").mkdir()
    assert modified_file(snapshot) == "backend/__pycache__"
    with writable(backend):
        (backend / "__pycache__").rmdir()
    assert modified_file(snapshot) is None
    with writable(backend):
        (backend / "run.sh").unlink()
    assert modified_file(snapshot) == "backend/run.sh"
    rewrite(backend / "a.py", "a = 'edited'\n")
    assert modified_file(snapshot) == "backend/a.py"


def test_modified_file_sees_a_changed_mode_or_link(snapshot: Path) -> None:
    (snapshot / "backend" / "a.py").chmod(0o644)
    assert modified_file(snapshot) == "backend/a.py"
    (snapshot / "backend" / "a.py").chmod(0o444)
    assert modified_file(snapshot) is None
    backend = snapshot / "backend"
    with writable(backend):
        (backend / "link.py").unlink()
        (backend / "link.py").symlink_to("run.sh")
    assert modified_file(snapshot) == "backend/link.py"
    manifest_path(snapshot).unlink()
    assert modified_file(snapshot) == "."


def test_a_revision_editing_its_snapshot_does_not_poison_the_next_use(snapshot: Path, tmp_path: Path) -> None:
    backend = snapshot / "backend"
    rewrite(backend / "a.py", "a = 'poisoned'\n")
    with writable(backend):
        (backend / "stray.py").write_text("left by the probe\n")
    again = SnapshotCache(snapshot.parent).materialise(Repo(tmp_path / "work"), "HEAD", BACKEND)
    assert again == snapshot
    assert (backend / "a.py").read_text() == "a = 1\n" and not (backend / "stray.py").exists()
    assert modified_file(again) is None
    manifest_path(snapshot).unlink()
    SnapshotCache(snapshot.parent).materialise(Repo(tmp_path / "work"), "HEAD", BACKEND)
    assert modified_file(snapshot) is None
