"""Reuse by what a probe read: a result holds at another revision when every file it read is
byte-identical there and every directory it listed holds the same names. Pure entries with
hypothesis; then real git, real workers and SQLite: a module probe whose reads are traced, a
command whose reads are declared, and the demo's probes."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest
from cli_in import regtrack
from demo_histories import DemoHistories
from gitrepo import GitRepo
from hypothesis import given
from hypothesis import strategies as st

from tracker.targets.inputs import (
    ABSENT,
    Listing,
    Reads,
    declared,
    holds,
    source_of_bytecode,
    traced,
)

MODULE_PROBE = '''\
from probes import ProbeResult
from tracker.core.verdicts import Outcome


def verify(ctx, params):
    """core.add(2, 2) is 4"""
    total = ctx.import_package("mylib.core").add(2, 2)
    if total == 4:
        return ProbeResult.passed(total=float(total))
    return ProbeResult(Outcome.FAIL, {"total": float(total)}, signature=f"add(2, 2) == {total}")
'''
CORE = "def add(a, b):\n    return a + b\n"
BUGGY_CORE = "def add(a, b):\n    return a + b + 1\n"
CONFIG = """
[targets.mylib]
repo = {repo!r}
paths = ["mylib", "docs"]

[targets.mylib.probes.verify]
module = "ci/probes.py:verify"

[targets.mylib.probes.check]
command = ["python", "-c", "import sys; sys.path.insert(0, '.'); from mylib.core import add; sys.exit(add(2, 2) != 4)"]
reads = ["mylib/core.py", "mylib/__init__.py"]
"""


# -- the entries, pure ---------------------------------------------------------------------------

names = st.sampled_from(["a", "b", "c.py", "d.py"])
paths = st.lists(names, min_size=1, max_size=3).map("/".join)
blobs = st.text("0123456789abcdef", min_size=4, max_size=4)
trees = st.dictionaries(paths, blobs, min_size=1, max_size=12)


def leaves(files: dict[str, str]) -> dict[str, str]:
    """The files of a drawn tree that are not also a directory of another."""
    return {path: blob for path, blob in files.items() if not any(other.startswith(path + "/") for other in files)}


def listing_of(files: dict[str, str]) -> Listing:
    """A listing of files (path -> blob), with every directory above them."""
    rows: dict[str, tuple[str, str, str]] = {}
    for path, blob in files.items():
        parts = path.split("/")
        for depth in range(1, len(parts)):
            directory = "/".join(parts[:depth])
            rows[directory] = ("040000", "tree-" + directory, directory)
        rows[path] = ("100644", blob, path)
    return Listing.of(rows.values())


@given(trees.map(leaves), st.data())
def test_what_was_read_holds_where_it_was_read_and_breaks_when_a_read_file_changes(
    files: dict[str, str], data: st.DataObject
) -> None:
    listing = listing_of(files)
    read = data.draw(st.lists(st.sampled_from(sorted(files)), min_size=1, unique=True))
    entries = traced(Reads(tuple(read), ("",), tuple(read)), listing)
    assert entries is not None and holds(entries, listing)
    changed = data.draw(st.sampled_from(read))
    assert not holds(entries, listing_of(files | {changed: files[changed] + "0"}))


@given(trees.map(leaves), st.data())
def test_a_file_that_was_not_read_may_change_whatever_was_listed(files: dict[str, str], data: st.DataObject) -> None:
    other = data.draw(st.sampled_from(sorted(files)))
    read = tuple(path for path in files if path != other)
    listed = data.draw(st.lists(st.sampled_from(["", *{path.rpartition("/")[0] for path in files}]), unique=True))
    entries = traced(Reads(read, tuple(listed), read), listing_of(files))
    assert entries is not None
    assert holds(entries, listing_of(files | {other: files[other] + "0"}))  # the same names, other content


def test_a_name_added_to_a_listed_directory_breaks_the_listing() -> None:
    files = {"pkg/__init__.py": "1111", "pkg/core.py": "2222"}
    entries = traced(Reads(("pkg/__init__.py",), ("pkg",), ("pkg/__init__.py",)), listing_of(files))
    assert entries is not None
    assert not holds(entries, listing_of(files | {"pkg/new.py": "3333"}))
    assert holds(entries, listing_of(files | {"docs/new.md": "3333"}))


def test_a_file_that_was_missing_must_stay_missing() -> None:
    before = listing_of({"pkg/__init__.py": "1111"})
    reads = Reads(("pkg/__init__.py", "pkg/extra.py"), (), ("pkg/__init__.py",))
    entries = traced(reads, before)
    assert entries is not None and ("f:pkg/extra.py", ABSENT) in entries
    assert holds(entries, before)
    assert not holds(entries, listing_of({"pkg/__init__.py": "1111", "pkg/extra.py": "2222"}))


def test_a_read_file_the_revision_does_not_hold_vouches_for_nothing() -> None:
    listing = listing_of({"pkg/__init__.py": "1111"})
    assert traced(Reads(("pkg/generated.py",), (), ("pkg/generated.py",)), listing) is None


def test_declared_reads_are_whole_subtrees() -> None:
    listing = listing_of({"src/a.py": "1111", "src/b.py": "2222", "docs/x.md": "3333"})
    entries = declared(("src",), listing)
    assert holds(entries, listing_of({"src/a.py": "1111", "src/b.py": "2222", "docs/x.md": "4444"}))


def test_bytecode_stands_for_its_source() -> None:
    assert source_of_bytecode("pkg/__pycache__/mod.cpython-311.pyc") == "pkg/mod.py"
    assert source_of_bytecode("__pycache__/top.cpython-311.opt-1.pyc") == "top.py"
    assert source_of_bytecode("pkg/mod.py") == "pkg/mod.py"


# -- real repositories -------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)
    return tmp_path / "home"


def run_row(where: Path, *args: str) -> dict:
    result = regtrack("run", *args, "--json", cwd=where)
    assert result.exit_code in (0, 1), result.output
    [row] = json.loads(result.stdout)["rows"]
    return row


@pytest.fixture()
def mylib(tmp_path: Path) -> tuple[GitRepo, Path]:
    repo = GitRepo(tmp_path / "work")
    repo.commit(
        "Add mylib",
        {
            "mylib/__init__.py": '"""mylib."""\n',
            "mylib/core.py": CORE,
            "mylib/extra.py": "UNUSED = 1\n",
            "docs/index.md": "# mylib\n",
            "ci/probes.py": MODULE_PROBE,
        },
    )
    where = tmp_path / "config"
    where.mkdir()
    (where / "regtrack.toml").write_text(CONFIG.format(repo=str(repo.path)).replace("python", sys.executable, 1))
    return repo, where


@pytest.mark.parametrize("probe", ["verify", "check"])
def test_a_commit_that_changes_only_files_the_probe_never_read_runs_nothing(
    mylib: tuple[GitRepo, Path], probe: str
) -> None:
    repo, where = mylib
    assert run_row(where, "--probe", probe, "HEAD")["reused"] is False
    repo.commit(
        "Edit an unused module and the docs", {"mylib/extra.py": "UNUSED = 2\n", "docs/index.md": "# mylib, v2\n"}
    )
    row = run_row(where, "--probe", probe, "HEAD")
    assert (row["reused"], row["verdict"]) == (True, "good")
    repo.commit("Plant the bug", {"mylib/core.py": BUGGY_CORE})
    row = run_row(where, "--probe", probe, "HEAD")
    assert (row["reused"], row["verdict"]) == (False, "bad")
    repo.commit("Mend it, byte for byte as before", {"mylib/core.py": CORE})
    row = run_row(where, "--probe", probe, "HEAD")
    assert (row["reused"], row["verdict"]) == (True, "good")  # the same blobs as the first commit's


def test_a_reused_result_is_stored_at_the_revision_it_stands_for(mylib: tuple[GitRepo, Path], home: Path) -> None:
    repo, where = mylib
    first = run_row(where, "--probe", "verify", "HEAD")
    edit = repo.commit("Edit the docs", {"docs/index.md": "# mylib, v2\n"})
    assert run_row(where, "--probe", "verify", "HEAD")["reused"] is True
    shown = json.loads(regtrack("show", edit, "--json", cwd=where).stdout)["runs"]
    assert [(r["sha"], r["outcome"], r["measured_at"], r["same_tree"]) for r in shown] == [
        (edit, "pass", first["sha"], False)
    ]
    with sqlite3.connect(home / "data" / "regtrack.db") as db:
        rows = db.execute("SELECT id, reused_from_id, duration_s, input_set_id FROM runs ORDER BY id").fetchall()
    [(source, none, _, inputs), (_, reused_from, duration, same_inputs)] = rows
    assert (none, reused_from, duration, same_inputs) == (None, source, 0.0, inputs)
    assert first["sha"] != edit


def test_a_module_added_where_an_import_looks_runs_afresh(mylib: tuple[GitRepo, Path]) -> None:
    repo, where = mylib
    assert run_row(where, "--probe", "verify", "HEAD")["reused"] is False
    # `import mylib.core` listed mylib/: a new name there could change what the import finds.
    repo.commit("Add a module", {"mylib/more.py": "X = 1\n"})
    assert run_row(where, "--probe", "verify", "HEAD")["reused"] is False


def test_other_settings_do_not_reuse_what_was_read(mylib: tuple[GitRepo, Path]) -> None:
    repo, where = mylib
    assert run_row(where, "--probe", "verify", "--seed", "1", "HEAD")["reused"] is False
    repo.commit("Edit the docs", {"docs/index.md": "# mylib, v2\n"})
    assert run_row(where, "--probe", "verify", "--seed", "2", "HEAD")["reused"] is False
    assert run_row(where, "--probe", "verify", "--seed", "1", "HEAD")["reused"] is True


def test_a_target_with_a_setup_step_reuses_by_tree_only(mylib: tuple[GitRepo, Path]) -> None:
    repo, where = mylib
    config = where / "regtrack.toml"
    config.write_text(
        config.read_text().replace('paths = ["mylib", "docs"]', 'paths = ["mylib", "docs"]\nsetup = ["true"]')
    )
    assert run_row(where, "--probe", "verify", "HEAD")["reused"] is False
    repo.commit("Edit the docs", {"docs/index.md": "# mylib, v2\n"})
    assert run_row(where, "--probe", "verify", "HEAD")["reused"] is False


def test_reads_of_a_module_probe_are_an_error(mylib: tuple[GitRepo, Path]) -> None:
    _, where = mylib
    config = where / "regtrack.toml"
    config.write_text(
        config.read_text().replace(
            'module = "ci/probes.py:verify"', 'module = "ci/probes.py:verify"\nreads = ["mylib"]'
        )
    )
    result = regtrack("run", "--probe", "verify", "HEAD", cwd=where)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "reads is for a command" in result.stderr


@pytest.mark.parametrize("bytecode", [False, True], ids=["bytecode-off", "bytecode-cached"])
def test_a_demo_probe_records_the_backend_files_it_read(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch, demo_histories: DemoHistories, bytecode: bool
) -> None:
    """With bytecode written (as on any machine without PYTHONDONTWRITEBYTECODE), a case after the
    first imports the backend from cached bytecode and opens no source: the reads must be the same."""
    if bytecode:
        monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    else:
        monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    repo = tmp_path / "demo"
    demo_histories.copy(60, repo)
    result = regtrack("run", "--repo", str(repo), "--probe", "swa_page_table", "HEAD", "--json", cwd=tmp_path)
    assert result.exit_code == 0, result.output
    with sqlite3.connect(home / "data" / "regtrack.db") as db:
        [(entries,)] = db.execute(
            "SELECT DISTINCT input_sets.entries FROM runs JOIN input_sets ON runs.input_set_id = input_sets.id"
        ).fetchall()
    read = dict(json.loads(entries))
    assert "f:backend/__init__.py" in read and "d:backend" in read
    assert all(key.startswith(("f:backend/", "d:backend", "d:")) for key in read)
