from __future__ import annotations

import math
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect
from sqlalchemy.exc import IntegrityError, StatementError

from db.models import SCHEMA_REVISION, Base
from db.paths import cache_dir, data_dir, default_db_url
from db.store import Store, upgrade
from tracker.core.errors import UsageError
from tracker.core.records import CaseKey, ClaimState, CommitInfo, EnvironmentInfo, RunRecord
from tracker.core.verdicts import Outcome
from tracker.execution import owners

PROJECT_ROOT = Path(__file__).resolve().parent.parent
T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
TABLES = {
    "repositories",
    "commits",
    "target_trees",
    "environments",
    "input_sets",
    "probe_versions",
    "runs",
    "track_states",
    "transitions",
    "bisect_sessions",
    "bisect_steps",
    "claims",
    "verifications",
}
H200 = EnvironmentInfo(
    device="cuda",
    gpu_name="NVIDIA H200",
    compute_capability="9.0",
    driver="570.1",
    cuda="12.8",
    torch="2.11.0",
    flashinfer="0.7.2.post1",
    python="3.11.7",
    host="node-a",
)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)
    return tmp_path / "home"


@pytest.fixture
def db_path(home: Path) -> Path:
    return home / "data" / "regtrack.db"


@pytest.fixture
def store(home: Path) -> Iterator[Store]:
    with Store.open() as store:
        yield store


def _commit(n: int, parent: str | None = None, **fields: object) -> CommitInfo:
    info = CommitInfo(
        sha=f"{n:040x}",
        parents=(parent,) if parent else (),
        subject=f"commit {n}",
        author="A U Thor <author@example.com>",
        authored_at=T0 + timedelta(hours=n),
    )
    return replace(info, **fields)


def _record(repo_id: int, sha: str, env_id: int, probe_id: int, **fields: object) -> RunRecord:
    run = RunRecord(
        repo_id=repo_id,
        sha=sha,
        tree_hash="tree-a",
        environment_id=env_id,
        probe_id=probe_id,
        case_id="bs4_T2_N4",
        settings_key="settings-a",
        dtype="float32",
        outcome=Outcome.PASS,
        metrics={"max_abs_error": 0.001, "nan_count": 0},
        signature=None,
        detail="",
        duration_s=0.25,
        started_at=T0,
        attempt=1,
        seed=0,
        trigger="run",
    )
    return replace(run, **fields)


@pytest.fixture
def seeded(store: Store, tmp_path: Path) -> tuple[int, int, int]:
    repo_id = store.repository(tmp_path / "repo")
    store.record_commits(repo_id, [_commit(1), _commit(2, _commit(1).sha), _commit(3, _commit(2).sha)])
    return repo_id, store.environment(H200), store.probe_version("target_verify_metadata", 1, "c0de")


@contextmanager
def _unprivileged() -> Iterator[None]:
    """Drop to nobody while inside, so that file permissions apply even when the tests run as root."""
    if os.geteuid() != 0:
        yield
        return
    os.setegid(65534)
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


def test_data_and_cache_dirs_follow_regtrack_home(home: Path) -> None:
    assert data_dir() == home / "data"
    assert cache_dir() == home / "cache"
    assert default_db_url() == f"sqlite:///{home / 'data' / 'regtrack.db'}"


def test_dirs_fall_back_to_xdg_then_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("REGTRACK_HOME", "REGTRACK_DB_URL", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert data_dir() == tmp_path / "user" / ".local" / "share" / "regtrack"
    assert cache_dir() == tmp_path / "user" / ".cache" / "regtrack"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/is/ignored")
    assert data_dir() == tmp_path / "xdg-data" / "regtrack"
    assert cache_dir() == tmp_path / "user" / ".cache" / "regtrack"


def test_regtrack_db_url_is_honoured(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "elsewhere" / "other.db"
    elsewhere.parent.mkdir()
    monkeypatch.setenv("REGTRACK_DB_URL", f"sqlite:///{elsewhere}")
    with Store.open() as store:
        store.repository(tmp_path)
        assert store.where == str(elsewhere)
    assert elsewhere.is_file()
    assert not (home / "data").exists()


def test_upgrade_from_empty_creates_the_schema_of_the_models(db_path: Path) -> None:
    upgrade()
    upgrade()
    engine = create_engine(f"sqlite:///{db_path}")
    try:
        assert set(inspect(engine).get_table_names()) == TABLES | {"alembic_version"}
        with engine.connect() as connection:
            context = MigrationContext.configure(connection)
            assert context.get_current_revision() == SCHEMA_REVISION
            assert compare_metadata(context, Base.metadata) == []
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    finally:
        engine.dispose()


def test_the_models_name_the_newest_migration_so_a_database_at_it_is_opened_without_alembic(db_path: Path) -> None:
    config = Config()
    config.set_main_option("script_location", "db:migrations")
    assert ScriptDirectory.from_config(config).get_current_head() == SCHEMA_REVISION
    code = "import sys; from db.store import Store; Store.open().close(); print('alembic' in sys.modules)"
    opened = [
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=PROJECT_ROOT
        ).stdout.strip()
        for _ in range(2)
    ]
    assert opened == ["True", "False"], (
        "the first opening migrates, the second finds the database at the newest revision"
    )


def test_concurrent_first_opens_all_succeed(db_path: Path) -> None:
    barrier = threading.Barrier(4)

    def open_once(_: int) -> str:
        barrier.wait()
        with Store.open() as store:
            return store.where

    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(open_once, range(4))) == [str(db_path)] * 4


def test_commits_round_trip_and_upsert(store: Store, tmp_path: Path) -> None:
    repo_id = store.repository(tmp_path / "repo")
    assert store.repository(tmp_path / "repo" / ".." / "repo") == repo_id
    local = timezone(timedelta(hours=-7))
    first = _commit(1, authored_at=datetime(2025, 3, 1, 5, 0, tzinfo=local))
    second = _commit(2, first.sha, pr_number=27494, reverts_sha=first.sha)
    store.record_commits(repo_id, [first, second])
    store.record_commits(repo_id, [replace(first, subject="amended metadata (#7)", pr_number=7)])

    assert store.commit(repo_id, second.sha) == second
    got = store.commit(repo_id, first.sha)
    assert got is not None and got.subject == "amended metadata (#7)" and got.pr_number == 7
    assert got.authored_at == datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
    assert got.authored_at.tzinfo == UTC
    assert store.commit(repo_id, "f" * 40) is None
    assert store.commit(store.repository(tmp_path / "other"), first.sha) is None


def test_record_tree(store: Store, seeded: tuple[int, int, int]) -> None:
    repo_id, _, _ = seeded
    store.record_tree(repo_id, _commit(1).sha, "backend", "tree-a")
    store.record_tree(repo_id, _commit(1).sha, "backend", "tree-a")
    assert store.tree_hash(repo_id, _commit(1).sha, "backend") == "tree-a"
    assert store.tree_hash(repo_id, _commit(1).sha, "backend probes") is None
    with pytest.raises(LookupError):
        store.record_tree(repo_id, "f" * 40, "backend", "tree-a")


def test_record_trees_stores_new_keeps_known_and_mends_changed_trees_at_once(
    store: Store, seeded: tuple[int, int, int]
) -> None:
    repo_id, _, _ = seeded
    one, two, three = (_commit(n).sha for n in (1, 2, 3))
    store.record_trees(repo_id, "backend", {one: "tree-a", two: "tree-b"})
    store.record_trees(repo_id, "backend", {one: "tree-a", two: "tree-c", three: "tree-d"})
    assert [store.tree_hash(repo_id, sha, "backend") for sha in (one, two, three)] == ["tree-a", "tree-c", "tree-d"]
    assert store.tree_hash(repo_id, one, ".") is None
    with pytest.raises(LookupError):
        store.record_trees(repo_id, "backend", {three: "tree-e", "f" * 40: "tree-a"})
    assert store.tree_hash(repo_id, three, "backend") == "tree-d", "nothing of a refused batch is stored"


def test_environment_fingerprint_is_stable_and_deduplicated(store: Store) -> None:
    assert H200.fingerprint == replace(H200, host="node-b").fingerprint
    assert len(H200.fingerprint) == 16 and int(H200.fingerprint, 16) >= 0
    assert H200.fingerprint != replace(H200, driver="575.0").fingerprint
    env_id = store.environment(H200)
    assert store.environment(replace(H200, host="node-b")) == env_id
    assert store.environment(replace(H200, torch="2.12.0")) != env_id
    assert store.environment(EnvironmentInfo(device="cpu", python="3.11.7")) not in (None, env_id)


def test_probe_versions_are_deduplicated(store: Store) -> None:
    first = store.probe_version("decode_graph_replay", 1, "abc")
    assert store.probe_version("decode_graph_replay", 1, "abc") == first
    assert store.probe_version("decode_graph_replay", 1, "abd") != first
    assert store.probe_version("decode_graph_replay", 2, "abc") != first


def test_runs_round_trip(store: Store, seeded: tuple[int, int, int]) -> None:
    repo_id, env_id, probe_id = seeded
    failed = _record(
        repo_id,
        _commit(2).sha,
        env_id,
        probe_id,
        tree_hash="tree-b",
        outcome=Outcome.FAIL,
        metrics={"max_abs_error": math.nan, "rel_error": math.inf, "nan_count": 3},
        signature="cache_seqlens off by +2",
        detail="Traceback ...\nline two",
    )
    run_id = store.add_run(failed)
    [stored] = store.runs_for_tree("tree-b", probe_id, env_id)
    assert stored.id == run_id
    assert (stored.sha, stored.outcome, stored.signature) == (_commit(2).sha, Outcome.FAIL, failed.signature)
    assert math.isnan(stored.metrics["max_abs_error"]) and stored.metrics["rel_error"] == math.inf
    assert stored.metrics["nan_count"] == 3
    assert stored.started_at == T0 and stored.started_at.tzinfo == UTC
    assert (stored.duration_s, stored.attempt, stored.seed, stored.trigger) == (0.25, 1, 0, "run")

    [row] = store.runs(repo_id=repo_id)
    assert row.id == run_id and row.detail == failed.detail
    assert (row.probe_name, row.probe_version, row.subject) == ("target_verify_metadata", 1, "commit 2")
    assert (row.fingerprint, row.gpu_name) == (H200.fingerprint, "NVIDIA H200")


def test_runs_are_append_only(store: Store, seeded: tuple[int, int, int]) -> None:
    repo_id, env_id, probe_id = seeded
    first = store.add_run(_record(repo_id, _commit(1).sha, env_id, probe_id))
    second = store.add_run(_record(repo_id, _commit(1).sha, env_id, probe_id, outcome=Outcome.FAIL, attempt=2))
    assert second != first
    runs = store.runs_for_tree("tree-a", probe_id, env_id)
    assert [(run.id, run.outcome, run.attempt) for run in runs] == [
        (first, Outcome.PASS, 1),
        (second, Outcome.FAIL, 2),
    ]


def test_runs_for_tree_spans_commits_that_share_the_tree(store: Store, seeded: tuple[int, int, int]) -> None:
    repo_id, env_id, probe_id = seeded
    store.add_run(_record(repo_id, _commit(1).sha, env_id, probe_id, case_id="a"))
    store.add_run(_record(repo_id, _commit(3).sha, env_id, probe_id, case_id="b"))
    store.add_run(_record(repo_id, _commit(2).sha, env_id, probe_id, tree_hash="tree-b"))
    other_probe = store.probe_version("target_verify_metadata", 2, "c0de")
    store.add_run(_record(repo_id, _commit(1).sha, env_id, other_probe))
    other_env = store.environment(replace(H200, gpu_name="NVIDIA B200"))
    store.add_run(_record(repo_id, _commit(1).sha, other_env, probe_id))

    runs = store.runs_for_tree("tree-a", probe_id, env_id)
    assert [(run.sha, run.case_id) for run in runs] == [(_commit(1).sha, "a"), (_commit(3).sha, "b")]
    assert store.runs_for_tree("tree-c", probe_id, env_id) == []


def test_runs_filters(store: Store, seeded: tuple[int, int, int], tmp_path: Path) -> None:
    repo_id, env_id, probe_id = seeded
    other_probe = store.probe_version("swa_page_table", 1, "5ca1")
    ids = [
        store.add_run(_record(repo_id, _commit(1).sha, env_id, probe_id)),
        store.add_run(_record(repo_id, _commit(2).sha, env_id, probe_id, outcome=Outcome.FAIL, tree_hash="tree-b")),
        store.add_run(_record(repo_id, _commit(3).sha, env_id, other_probe)),
    ]
    other_repo = store.repository(tmp_path / "other")
    store.record_commits(other_repo, [_commit(1)])
    store.add_run(_record(other_repo, _commit(1).sha, env_id, probe_id, tree_hash="tree-c"))

    assert [row.id for row in store.runs(repo_id=repo_id)] == ids[::-1]
    assert [row.id for row in store.runs(repo_id=repo_id, limit=2)] == ids[:0:-1]
    assert [row.id for row in store.runs(repo_id=repo_id, probe="swa_page_table")] == [ids[2]]
    assert [row.id for row in store.runs(repo_id=repo_id, outcome="fail")] == [ids[1]]
    assert [row.id for row in store.runs(repo_id=repo_id, outcome=Outcome.PASS)] == [ids[2], ids[0]]
    assert [row.id for row in store.runs(shas=[_commit(2).sha])] == [ids[1]]
    assert len(store.runs()) == 4


def test_nothing_is_half_written(store: Store, seeded: tuple[int, int, int]) -> None:
    repo_id, env_id, probe_id = seeded
    with pytest.raises(LookupError, match="record_commits"):
        store.add_run(_record(repo_id, "f" * 40, env_id, probe_id))
    with pytest.raises(IntegrityError):
        store.add_run(_record(repo_id, _commit(1).sha, env_id + 100, probe_id))
    with pytest.raises(IntegrityError):
        store.record_commits(repo_id, [_commit(4), _commit(5, subject=None)])
    with pytest.raises(StatementError, match="naive datetime"):
        store.add_run(_record(repo_id, _commit(1).sha, env_id, probe_id, started_at=datetime(2025, 1, 1)))
    assert store.runs() == []
    assert store.commit(repo_id, _commit(4).sha) is None


def test_a_new_attempt_takes_the_smallest_number_nothing_stored_and_no_live_process_holds(
    store: Store, seeded: tuple[int, int, int], db_path: Path
) -> None:
    repo_id, env_id, probe_id = seeded
    key = CaseKey("tree-a", probe_id, env_id, "settings-a", "bs4_T2_N4")
    for attempt in (1, 3):
        store.add_run(_record(repo_id, _commit(1).sha, env_id, probe_id, attempt=attempt))
    gone = _finished_process_owner()
    in_an_hour = datetime.now(UTC) + timedelta(hours=1)
    assert store.claim(key, 2, gone, in_an_hour, owners.is_stale) is ClaimState.CLAIMED
    assert store.new_attempt([key], owners.is_stale) == 2
    with sqlite3.connect(db_path) as connection:
        # the dead process's claim is released
        assert connection.execute("SELECT count(*) FROM claims").fetchone() == (0,)
    assert store.claim(key, 2, owners.this_process(), in_an_hour, owners.is_stale) is ClaimState.CLAIMED
    assert store.new_attempt([key], owners.is_stale) == 4


def _finished_process_owner() -> str:
    """The owner name of a process that has exited, as ``owners.this_process`` names one."""
    process = subprocess.Popen(["true"])
    process.wait()
    return f"{socket.gethostname()}:{process.pid}:0"


def test_bisect_sessions_and_steps(store: Store, seeded: tuple[int, int, int]) -> None:
    repo_id, env_id, probe_id = seeded
    good, bad = _commit(1).sha, _commit(3).sha
    older = store.start_session(repo_id, "backend", probe_id, good, bad, "binary")
    newer = store.start_session(repo_id, "backend", probe_id, good, bad, "binary")
    store.start_session(repo_id, "other", probe_id, good, bad, "binary")
    assert [s.id for s in store.open_sessions(repo_id, "backend", probe_id)] == [newer, older]

    store.add_step(newer, good, "good", reused=True)
    store.add_step(newer, bad, "bad", reused=False)
    store.add_step(newer, _commit(2).sha, "skip", reused=False)
    store.add_run(_record(repo_id, bad, env_id, probe_id, trigger="bisect", session_id=newer))
    steps = store.steps(newer)
    assert [(s.position, s.sha, s.verdict, s.reused) for s in steps] == [
        (0, good, "good", True),
        (1, bad, "bad", False),
        (2, _commit(2).sha, "skip", False),
    ]
    assert all(s.created_at.tzinfo == UTC for s in steps)
    assert store.steps(older) == []
    assert [run.session_id for run in store.runs()] == [newer]

    running = store.session(newer)
    assert (running.status, running.finished_at, running.result) == ("running", None, None)
    assert (running.repo_id, running.target, running.good_sha, running.bad_sha) == (
        repo_id,
        "backend",
        good,
        bad,
    )
    store.finish_session(newer, "done", {"culprit": bad, "candidates": [bad]})
    done = store.session(newer)
    assert done.status == "done" and done.result == {"culprit": bad, "candidates": [bad]}
    assert done.finished_at is not None and done.finished_at >= done.started_at
    assert [s.id for s in store.open_sessions(repo_id, "backend", probe_id)] == [older]
    with pytest.raises(LookupError):
        store.session(9999)


def test_the_missing_data_directory_is_created(home: Path) -> None:
    Store.open().close()
    assert (home / "data" / "regtrack.db").is_file()


def test_a_url_in_a_missing_directory_is_refused_and_nothing_is_created(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "regtrack.db"
    with pytest.raises(UsageError) as info:
        Store.open(f"sqlite:///{path}")
    assert str(info.value) == (
        f"the directory {path.parent} of database {path} does not exist; "
        "create it, or set REGTRACK_DB_URL to a file in an existing directory"
    )
    assert not (tmp_path / "a").exists()


def test_an_uncreatable_data_directory_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "file" / "home"))
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)
    refused = r"cannot create directory .*/file/home/data for database .*; set REGTRACK_HOME or REGTRACK_DB_URL"
    with pytest.raises(UsageError, match=refused):
        Store.open()


def test_unwritable_directory_is_a_usage_error(store: Store) -> None:
    directory = Path(tempfile.mkdtemp())
    directory.chmod(0o555)
    path = directory / "regtrack.db"
    try:
        with _unprivileged(), pytest.raises(UsageError) as info:
            Store.open(f"sqlite:///{path}")
    finally:
        directory.chmod(0o755)
        shutil.rmtree(directory)
    assert str(info.value) == (
        f"database {path} cannot be opened: its directory {directory} cannot be written (Permission denied), "
        "and SQLite writes beside the database; make it writable, "
        "or set REGTRACK_HOME or REGTRACK_DB_URL to a writable place"
    )


def test_a_read_only_database_file_in_a_writable_directory_is_a_usage_error() -> None:
    directory = Path(tempfile.mkdtemp())
    path = directory / "regtrack.db"
    Store.open(f"sqlite:///{path}").close()
    directory.chmod(0o777)
    path.chmod(0o444)
    try:
        with _unprivileged(), pytest.raises(UsageError) as info:
            with Store.open(f"sqlite:///{path}") as store:
                store.repository(directory)
    finally:
        shutil.rmtree(directory)
    assert str(info.value).startswith(f"database {path} cannot be written (")
    assert str(info.value).endswith("fix its permissions or set REGTRACK_DB_URL to a writable file")


def test_locked_database_is_a_usage_error(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    holder = sqlite3.connect(db_path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(UsageError) as info:
            Store.open(busy_timeout_ms=100)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert str(info.value) == (
        f"database {db_path} is locked by another process; wait for it to finish or set REGTRACK_DB_URL to another file"
    )


def test_open_at_head_only_reads_and_a_locked_write_fails_whole(db_path: Path, tmp_path: Path) -> None:
    Store.open().close()
    holder = sqlite3.connect(db_path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with Store.open(busy_timeout_ms=100) as store:
            assert store.runs() == []
            with pytest.raises(UsageError, match="is locked by another process"):
                store.repository(tmp_path)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with Store.open() as store:
        assert store.repository(tmp_path) == 1


def test_unknown_schema_revision_is_a_usage_error(db_path: Path) -> None:
    upgrade()
    with sqlite3.connect(db_path) as connection:
        connection.execute("UPDATE alembic_version SET version_num = '9999'")
    with pytest.raises(UsageError, match="schema revision '9999', unknown to this regtrack"):
        Store.open()


def test_invalid_url_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="invalid database URL 'not a url'"):
        Store.open("not a url")
    with pytest.raises(UsageError, match="install its driver"):
        Store.open("nosuchdialect://host/db")


def test_sessions_and_environments_of_a_repository(store: Store, seeded: tuple[int, int, int], tmp_path: Path) -> None:
    repo_id, env_id, probe_id = seeded
    good, bad = _commit(1).sha, _commit(3).sha
    swa = store.probe_version("swa_page_table", 1, "5ca1")
    first = store.start_session(repo_id, "backend", probe_id, good, bad, "binary")
    second = store.start_session(repo_id, "other", swa, good, bad, "binary")
    other_repo = store.repository(tmp_path / "other")
    store.record_commits(other_repo, [_commit(1)])
    store.start_session(other_repo, "backend", probe_id, good, good, "binary")
    assert [(s.id, s.probe_name) for s in store.sessions(repo_id)] == [
        (first, "target_verify_metadata"),
        (second, "swa_page_table"),
    ]
    assert [s.id for s in store.sessions(repo_id, "other")] == [second]
    assert store.session(second).probe_name == "swa_page_table"
    assert [s.probe_name for s in store.open_sessions(repo_id, "backend", probe_id)] == ["target_verify_metadata"]

    b200 = replace(H200, gpu_name="NVIDIA B200")
    b200_id = store.environment(b200)
    store.environment(EnvironmentInfo(device="cpu", python="3.11.7"))  # no runs anywhere
    assert store.environments(repo_id) == []
    store.add_run(_record(repo_id, _commit(1).sha, env_id, probe_id))
    store.add_run(_record(repo_id, _commit(2).sha, env_id, swa, tree_hash="tree-b"))
    store.add_run(_record(other_repo, _commit(1).sha, b200_id, probe_id))
    assert store.environments(repo_id) == [(H200.fingerprint, H200)]
    assert store.environments(other_repo) == [(b200.fingerprint, b200)]
    assert [(r.sha, r.tree_hash) for r in store.runs(repo_id=repo_id, trees=["tree-b", "tree-c"])] == [
        (_commit(2).sha, "tree-b")
    ]
