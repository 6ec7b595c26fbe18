"""The store opened read-only: the same queries as the store that writes, answered without
migrating or writing anything; whatever it does not hold, or would have to write, is ``NotStored``.
Also the reads a query makes that read-only use shares with any store: probes and environments of
a repository, copies of copies, ranges past SQLite's parameter limit."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from db.errors import NotStored
from db.store import Store
from tracker.core.errors import UsageError
from tracker.core.records import CaseKey, CommitInfo, EnvironmentInfo, RunRecord, TransitionKind, TransitionRecord
from tracker.core.verdicts import Outcome

T0 = datetime(2026, 6, 1, 8, 30, 15, 250000, tzinfo=UTC)
CPU = EnvironmentInfo(device="cpu", torch="2.13.0", python="3.11.7", host="ci", facts={"target": "demo"})
TREES = ("tree-a", "tree-b", "tree-c")
RUNS = [(0, "tree-a", "key-1", "case-1", 1, Outcome.PASS), (3, "tree-a", "key-2", "case-2", 2, Outcome.FAIL)]


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'regtrack.db'}"


@pytest.fixture
def store(url: str) -> Iterator[Store]:
    with Store.open(url) as store:
        yield store


def commit(n: int, **fields: object) -> CommitInfo:
    parents = (f"{n - 1:040x}",) if n else ()
    info = CommitInfo(f"{n:040x}", parents, f"Change {n} (#{100 + n})", "A <a@x>", T0 + timedelta(hours=n), 100 + n)
    return replace(info, **fields)


def run_record(repo_id: int, sha: str, env_id: int, probe_id: int, n: int = 0, **fields: object) -> RunRecord:
    measured = {"metrics": {"rel_err": 0.5 * n}, "duration_s": 0.25 * n, "started_at": T0 + timedelta(seconds=n)}
    record = RunRecord(
        repo_id,
        sha,
        "tree-a",
        env_id,
        probe_id,
        "case-1",
        "key-1",
        "float32",
        Outcome.PASS,
        **measured,
        signature=None,
        detail="detail",
        attempt=1,
        seed=7 + n,
        trigger="bisect",
    )
    return replace(record, **fields)


def seed(
    store: Store, repo: Path, runs: list[tuple[int, str, str, str, int, Outcome]]
) -> tuple[int, int, int, list[str]]:
    """Commits 0..4 with one tree each from TREES, and ``runs`` as (commit, tree, settings key, case,
    attempt, outcome)."""
    repo_id = store.repository(repo)
    commits = [
        commit(0),
        commit(1, reverts_sha=f"{0:040x}"),
        commit(2, subject="Ünïcode — subject", pr_number=None),
        commit(3),
        commit(4),
    ]
    store.record_commits(repo_id, commits)
    store.record_trees(repo_id, "paths-key", {c.sha: TREES[i % len(TREES)] for i, c in enumerate(commits)})
    env_id = store.environment(CPU)
    probe_id = store.probe_version("probe", 2, "code")
    for n, (at, tree, key, case, attempt, outcome) in enumerate(runs):
        fields = {"tree_hash": tree, "settings_key": key, "case_id": case, "attempt": attempt, "outcome": outcome}
        store.add_run(run_record(repo_id, commits[at].sha, env_id, probe_id, n, **fields))
    return repo_id, env_id, probe_id, [c.sha for c in commits]


def test_read_only_it_answers_what_the_store_that_writes_answers(store: Store, url: str, tmp_path: Path) -> None:
    repo_id, env_id, probe_id, shas = seed(store, tmp_path, RUNS)
    store.record_transitions(
        repo_id, "target", [TransitionRecord("probe", shas[3], TransitionKind.REGRESSION, None, None, (), T0, "scan")]
    )
    with Store.open(url, read_only=True) as quick:
        assert quick.read_only and not store.read_only
        assert (quick.repository(tmp_path), quick.environment(CPU), quick.probe_version("probe", 2, "code")) == (
            repo_id,
            env_id,
            probe_id,
        )
        assert quick.stored_trees(repo_id, "paths-key", shas) == store.stored_trees(repo_id, "paths-key", shas)
        assert quick.runs_for_tree("tree-a", probe_id, env_id, ["key-2"]) == store.runs_for_tree(
            "tree-a", probe_id, env_id, ["key-2"]
        )
        assert quick.runs(repo_id=repo_id) == store.runs(repo_id=repo_id) != []
        assert quick.transitions(repo_id) == store.transitions(repo_id) != []
        assert (
            quick.commit(repo_id, shas[2])
            == store.commit(repo_id, shas[2])
            == commit(2, subject="Ünïcode — subject", pr_number=None)
        )


def test_read_only_anything_unrecorded_is_not_stored_and_nothing_is_written(
    store: Store, url: str, tmp_path: Path
) -> None:
    repo_id, env_id, probe_id, shas = seed(store, tmp_path, [])
    key = CaseKey("tree-a", probe_id, env_id, "key-1", "case-1")
    needs_a_write = [
        lambda quick: quick.repository(tmp_path / "elsewhere"),
        lambda quick: quick.environment(replace(CPU, torch="2.12.0")),
        lambda quick: quick.probe_version("probe", 2, "edited code"),
        lambda quick: quick.claim(key, 1, "host:1:2", T0, lambda owner, expires: True),
        lambda quick: quick.new_attempt([key], lambda owner, expires: True),
        lambda quick: quick.add_run(run_record(repo_id, shas[0], env_id, probe_id)),
        lambda quick: quick.record_commits(repo_id, [commit(9)]),
        lambda quick: quick.record_trees(repo_id, "paths-key", {shas[0]: "tree-a"}),
        lambda quick: quick.copy_attempt(repo_id, shas[1], "tree-b", [1], None, "run"),
        lambda quick: quick.start_session(repo_id, "target", probe_id, shas[0], shas[4], "binary"),
    ]
    with Store.open(url, read_only=True) as quick:
        for asked in needs_a_write:
            with pytest.raises(NotStored):
                asked(quick)
        quick.release_claims("host:1:2")
    assert store.runs_for_tree("tree-a", probe_id, env_id) == [] and store.sessions(repo_id) == []
    assert store.repository(tmp_path / "elsewhere") == repo_id + 1


def test_read_only_a_database_that_is_missing_or_behind_is_not_stored(tmp_path: Path) -> None:
    """The store that writes creates or migrates these; opened read-only, nothing is created."""
    missing = tmp_path / "missing.db"
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    older = tmp_path / "older.db"
    Store.open(f"sqlite:///{older}").close()
    with sqlite3.connect(older) as connection:
        connection.execute("UPDATE alembic_version SET version_num = '0003'")
    for url in (
        f"sqlite:///{missing}",
        f"sqlite:///{empty}",
        f"sqlite:///{older}",
        f"sqlite:///{older}?timeout=3",
        "sqlite://",
        "sqlite:///:memory:",
    ):
        with pytest.raises(NotStored):
            Store.open(url, read_only=True)
    assert not missing.exists(), "opening it created the file"
    assert empty.stat().st_size == 0


def test_read_only_a_database_that_is_not_regtracks_is_refused_as_the_store_that_writes_refuses_it(
    tmp_path: Path,
) -> None:
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database" * 100)
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as connection:
        connection.execute("CREATE TABLE notes (body TEXT)")
    for path in (garbage, foreign):
        for read_only in (True, False):
            with pytest.raises(UsageError) as refused:
                Store.open(f"sqlite:///{path}", read_only=read_only)
            assert str(refused.value).startswith(f"database {path} "), refused.value


def test_read_only_a_database_locked_by_a_writer_is_still_read(store: Store, url: str, tmp_path: Path) -> None:
    """WAL: a reader is never blocked by the one writer."""
    repo_id, _, _, _ = seed(store, tmp_path, [])
    writer = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        with Store.open(url, read_only=True, busy_timeout_ms=100) as quick:
            assert quick.repository(tmp_path) == repo_id
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_the_probes_and_environments_of_a_repository_are_those_of_its_runs(store: Store, tmp_path: Path) -> None:
    """What a query's --probe and --env may name."""
    repo_id, _, _, shas = seed(store, tmp_path, RUNS[:1])
    gpu = store.environment(EnvironmentInfo(device="cuda", gpu_name="NVIDIA H200", facts={"rack": "7"}))
    other_probe = store.probe_version("another probe", 1, "code")
    store.add_run(
        RunRecord(
            repo_id,
            shas[1],
            "tree-b",
            gpu,
            other_probe,
            "case-1",
            "key-1",
            "bfloat16",
            Outcome.SKIP,
            {},
            None,
            "",
            0.1,
            T0,
            1,
            0,
            "run",
        )
    )
    store.environment(EnvironmentInfo(device="cuda", gpu_name="NVIDIA B200"))
    other_repo = store.repository(tmp_path / "other")
    assert store.probe_names(repo_id) == ["another probe", "probe"]
    assert [(info.gpu_name, dict(info.facts)) for _, info in store.environments(repo_id)] == [
        (None, {"target": "demo"}),
        ("NVIDIA H200", {"rack": "7"}),
    ]
    assert store.probe_names(other_repo) == store.environments(other_repo) == []


def test_a_copied_result_names_the_commit_it_was_measured_at_through_copies_of_copies(
    store: Store, tmp_path: Path
) -> None:
    repo_id, _, _, shas = seed(
        store,
        tmp_path,
        [(0, "tree-a", "key-1", "case-1", 1, Outcome.FAIL), (0, "tree-a", "key-1", "case-2", 1, Outcome.PASS)],
    )
    measured = [r.id for r in store.runs(repo_id=repo_id)]
    store.copy_attempt(repo_id, shas[1], "tree-b", measured, None, "run")
    copies = [r.id for r in store.runs(repo_id=repo_id, trees=["tree-b"])]
    store.copy_attempt(repo_id, shas[2], "tree-c", copies, None, "run")
    copies_of_copies = [r.id for r in store.runs(repo_id=repo_id, trees=["tree-c"])]
    assert store.copied_from([*measured, *copies, *copies_of_copies, 999]) == dict.fromkeys(
        [*copies, *copies_of_copies], shas[0]
    )
    assert store.copied_from([]) == {}


def test_runs_are_asked_by_commits_or_by_trees(store: Store) -> None:
    with pytest.raises(ValueError, match="not both"):
        store.runs(shas=["a"], trees=["b"])


def test_a_commit_range_past_sqlites_parameter_limit_is_read_in_chunks(store: Store, url: str, tmp_path: Path) -> None:
    repo_id = store.repository(tmp_path)
    commits = [commit(n) for n in range(1, 33_000)]
    store.record_commits(repo_id, commits)
    store.record_trees(repo_id, "paths-key", {c.sha: "tree" for c in commits})
    shas = [c.sha for c in commits]
    with Store.open(url, read_only=True) as quick:
        assert quick.stored_trees(repo_id, "paths-key", shas) == dict.fromkeys(shas, "tree")
    assert len(store.runs(repo_id=repo_id, shas=shas)) == 0
