"""The read-only store answers every read of a bisect exactly as the full store does, and gives up
(``NotStored``) wherever the full store would have to write or would have something to say."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from db.readonly import NotStored, ReadOnlyStore
from db.store import Store
from tracker.core.records import CaseKey, CommitInfo, EnvironmentInfo, RunRecord, TransitionRecord
from tracker.core.verdicts import Outcome

T0 = datetime(2026, 6, 1, 8, 30, 15, 250000, tzinfo=timezone.utc)
CPU = EnvironmentInfo(device="cpu", torch="2.13.0", python="3.11.7", host="ci", facts={"target": "demo"})
TREES = ("tree-a", "tree-b", "tree-c")
KEYS = ("key-1", "key-2")


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'regtrack.db'}"


@pytest.fixture
def store(url: str) -> Iterator[Store]:
    with Store.open(url) as store:
        yield store


def commit(n: int, **fields: object) -> CommitInfo:
    info = CommitInfo(f"{n:040x}", (f"{n - 1:040x}",) if n else (), f"Change {n} (#{100 + n})", "A <a@x>", T0 + timedelta(hours=n), 100 + n)
    return replace(info, **fields)


def seed(store: Store, repo: Path, runs: list[tuple[int, str, str, str, int, Outcome]]) -> tuple[int, int, int, list[str]]:
    """Commits 0..4 with one tree each from TREES, and ``runs`` as (commit, tree, settings key, case, attempt, outcome)."""
    repo_id = store.repository(repo)
    commits = [commit(0), commit(1, reverts_sha=f"{0:040x}"), commit(2, subject="Ünïcode — subject", pr_number=None), commit(3), commit(4)]
    store.record_commits(repo_id, commits)
    store.record_trees(repo_id, "paths-key", {c.sha: TREES[i % len(TREES)] for i, c in enumerate(commits)})
    env_id = store.environment(CPU)
    probe_id = store.probe_version("probe", 2, "code")
    store.probe_version("probe", 3, "newer code")
    for n, (at, tree, key, case, attempt, outcome) in enumerate(runs):
        store.add_run(
            RunRecord(
                repo_id=repo_id, sha=commits[at].sha, tree_hash=tree, environment_id=env_id, probe_id=probe_id,
                case_id=case, settings_key=key, dtype="float32", outcome=outcome,
                metrics={"rel_err": 0.5 * n, "nested": {"a": [1, 2]}},
                signature=None if outcome is Outcome.PASS else f"failed {n}", detail="detail", duration_s=0.25 * n,
                started_at=T0 + timedelta(seconds=n), attempt=attempt, seed=7 + n, trigger="bisect",
            )
        )
    return repo_id, env_id, probe_id, [c.sha for c in commits]


run_row = st.tuples(
    st.integers(0, 4), st.sampled_from(TREES), st.sampled_from(KEYS), st.sampled_from(("case-1", "case-2")), st.integers(1, 3), st.sampled_from(list(Outcome))
)
run_rows = st.lists(
    run_row,
    max_size=12,
    unique_by=lambda r: (r[1], r[2], r[3], r[4]),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(runs=run_rows)
def test_every_read_of_a_bisect_answers_as_the_full_store_does(tmp_path_factory: pytest.TempPathFactory, runs: list) -> None:
    folder = tmp_path_factory.mktemp("store")
    url = f"sqlite:///{folder / 'regtrack.db'}"
    with Store.open(url) as full:
        repo_id, env_id, probe_id, shas = seed(full, folder, runs)
        with ReadOnlyStore.open(url) as quick:
            assert quick.repository(folder) == repo_id
            assert quick.environment(CPU) == env_id
            assert quick.probe_version("probe", 2, "code") == probe_id
            for sha in [*shas, "f" * 40]:
                assert quick.commit(repo_id, sha) == full.commit(repo_id, sha)
            for tree in [*TREES, "tree-unknown"]:
                for keys in (None, list(KEYS), ["key-2"], []):
                    assert quick.runs_for_tree(tree, probe_id, env_id, keys) == full.runs_for_tree(tree, probe_id, env_id, keys)
            assert sorted(quick.attempt_outcomes("probe", env_id, "float32")) == sorted(full.attempt_outcomes("probe", env_id, "float32"))
            assert quick.attempt_outcomes("probe", env_id, "bfloat16") == []


HISTORY_QUESTIONS = (
    {},
    {"probe": "probe"},
    {"probe": "another probe"},
    {"outcome": Outcome.FAIL},
    {"outcome": "pass", "limit": 2},
    {"limit": 1},
    {"shas": "first three"},
    {"shas": "none"},
    {"trees": ["tree-b", "tree-c"], "limit": 3},
    {"trees": []},
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(runs=run_rows)
def test_every_read_of_a_query_answers_as_the_full_store_does(tmp_path_factory: pytest.TempPathFactory, runs: list) -> None:
    """history, show and regressions read runs and transitions through the read-only store."""
    folder = tmp_path_factory.mktemp("store")
    url = f"sqlite:///{folder / 'regtrack.db'}"
    with Store.open(url) as full:
        repo_id, _, _, shas = seed(full, folder, runs)
        full.record_transitions(repo_id, "target", [
            TransitionRecord("probe", shas[3], "regression", None, None, (shas[2], shas[3]), T0 + timedelta(hours=3), "scan"),
            TransitionRecord("probe", shas[1], "fix", shas[0], "reverts", (), T0 + timedelta(hours=1), "track"),
            TransitionRecord("other", shas[4], "regression", None, None, (), T0 + timedelta(hours=4), "scan"),
        ])  # fmt: skip
        with ReadOnlyStore.open(url) as quick:
            for question in HISTORY_QUESTIONS:
                asked = {**question, "shas": {"first three": shas[:3], "none": []}[question["shas"]]} if "shas" in question else question
                for repo in (repo_id, repo_id + 1, None):
                    assert quick.runs(repo_id=repo, **asked) == full.runs(repo_id=repo, **asked)
            for target, probe in ((None, None), ("target", None), ("target", "probe"), ("other target", None)):
                assert quick.transitions(repo_id, target, probe) == full.transitions(repo_id, target, probe)
            for repo in (repo_id, repo_id + 1):
                assert quick.probe_names(repo) == full.probe_names(repo)
                assert quick.environments(repo) == full.environments(repo)


def test_the_probes_and_environments_of_a_repository_are_those_of_its_runs(store: Store, url: str, tmp_path: Path) -> None:
    """What a query's --probe and --env may name."""
    repo_id, _, _, shas = seed(store, tmp_path, [(0, "tree-a", "key-1", "case-1", 1, Outcome.PASS)])
    gpu = store.environment(EnvironmentInfo(device="cuda", gpu_name="NVIDIA H200", facts={"rack": "7"}))
    other_probe = store.probe_version("another probe", 1, "code")
    store.add_run(RunRecord(repo_id, shas[1], "tree-b", gpu, other_probe, "case-1", "key-1", "bfloat16", Outcome.SKIP, {}, None, "", 0.1, T0, 1, 0, "run"))
    store.environment(EnvironmentInfo(device="cuda", gpu_name="NVIDIA B200"))
    other_repo = store.repository(tmp_path / "other")
    with ReadOnlyStore.open(url) as quick:
        for repo in (repo_id, other_repo):
            assert quick.probe_names(repo) == store.probe_names(repo)
            assert quick.environments(repo) == store.environments(repo)
    assert store.probe_names(repo_id) == ["another probe", "probe"]
    assert [(info.gpu_name, dict(info.facts)) for _, info in store.environments(repo_id)] == [(None, {"target": "demo"}), ("NVIDIA H200", {"rack": "7"})]
    assert store.probe_names(other_repo) == store.environments(other_repo) == []


def test_a_copied_result_names_the_commit_it_was_measured_at_through_copies_of_copies(store: Store, url: str, tmp_path: Path) -> None:
    repo_id, _, _, shas = seed(store, tmp_path, [(0, "tree-a", "key-1", "case-1", 1, Outcome.FAIL), (0, "tree-a", "key-1", "case-2", 1, Outcome.PASS)])
    measured = [r.id for r in store.runs(repo_id=repo_id)]
    store.copy_attempt(repo_id, shas[1], "tree-b", measured, None, "run")
    copies = [r.id for r in store.runs(repo_id=repo_id, trees=["tree-b"])]
    store.copy_attempt(repo_id, shas[2], "tree-c", copies, None, "run")
    copies_of_copies = [r.id for r in store.runs(repo_id=repo_id, trees=["tree-c"])]
    asked = [*measured, *copies, *copies_of_copies, 999]
    with ReadOnlyStore.open(url) as quick:
        assert quick.copied_from(asked) == store.copied_from(asked) == dict.fromkeys([*copies, *copies_of_copies], shas[0])
        assert quick.copied_from([]) == store.copied_from([]) == {}


def test_runs_are_asked_by_commits_or_by_trees(store: Store, url: str) -> None:
    with ReadOnlyStore.open(url) as quick:
        for reader in (store, quick):
            with pytest.raises(ValueError, match="not both"):
                reader.runs(shas=["a"], trees=["b"])


def test_it_reads_the_trees_the_full_store_holds_and_anything_unrecorded_is_not_stored(store: Store, url: str, tmp_path: Path) -> None:
    repo_id, _, _, shas = seed(store, tmp_path, [])
    asked = [
        (repo_id, "paths-key", shas),
        (repo_id, "paths-key", shas[1:3]),
        (repo_id, "paths-key", [*shas, "f" * 40]),
        (repo_id, "other paths", shas),
        (repo_id + 1, "paths-key", shas),
    ]
    with ReadOnlyStore.open(url) as quick:
        assert [quick.stored_trees(*question) for question in asked] == [store.stored_trees(*question) for question in asked]
        recorded = {sha: TREES[i % len(TREES)] for i, sha in enumerate(shas)}
        assert [store.stored_trees(*question) for question in asked] == [recorded, {s: recorded[s] for s in shas[1:3]}, recorded, {}, {}]
        for unknown in (
            lambda: quick.repository(tmp_path / "elsewhere"),
            lambda: quick.environment(replace(CPU, torch="2.12.0")),
            lambda: quick.environment(replace(CPU, facts={})),
            lambda: quick.probe_version("probe", 2, "edited code"),
        ):
            with pytest.raises(NotStored):
                unknown()


def test_a_commit_range_past_sqlites_parameter_limit_is_read_in_chunks(store: Store, url: str, tmp_path: Path) -> None:
    repo_id = store.repository(tmp_path)
    commits = [commit(n) for n in range(1, 33_000)]
    store.record_commits(repo_id, commits)
    store.record_trees(repo_id, "paths-key", {c.sha: "tree" for c in commits})
    shas = [c.sha for c in commits]
    with ReadOnlyStore.open(url) as quick:
        assert quick.stored_trees(repo_id, "paths-key", shas) == dict.fromkeys(shas, "tree")
    assert store.stored_trees(repo_id, "paths-key", shas) == dict.fromkeys(shas, "tree")


def test_whatever_needs_a_write_is_not_stored(store: Store, url: str, tmp_path: Path) -> None:
    repo_id, env_id, probe_id, shas = seed(store, tmp_path, [])
    key = CaseKey("tree-a", probe_id, env_id, "key-1", "case-1")
    with ReadOnlyStore.open(url) as quick:
        with pytest.raises(NotStored):
            quick.claim(key, 1, "host:1:2", T0, lambda owner, expires: True)
        with pytest.raises(NotStored):
            quick.new_attempt([key], lambda owner, expires: True)
        with pytest.raises(NotStored):
            quick.add_run(RunRecord(repo_id, shas[0], "tree-a", env_id, probe_id, "case-1", "key-1", "float32", Outcome.PASS, {}, None, "", 0.1, T0, 1, 0, "run"))
        with pytest.raises(NotStored):
            quick.record_commits(repo_id, [commit(9)])
        with pytest.raises(NotStored):
            quick.record_trees(repo_id, "paths-key", {shas[0]: "tree-a"})
        quick.release_claims("host:1:2")
    assert store.runs_for_tree("tree-a", probe_id, env_id) == []


def test_a_database_it_cannot_read_as_the_full_store_would_is_not_stored(tmp_path: Path) -> None:
    """Missing, empty, not SQLite, not regtrack's, at another schema revision, not SQLite at all,
    in memory: the full store creates, migrates or refuses it with its own message."""
    missing = tmp_path / "missing.db"
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database" * 100)
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as connection:
        connection.execute("CREATE TABLE notes (body TEXT)")
    older = tmp_path / "older.db"
    Store.open(f"sqlite:///{older}").close()
    with sqlite3.connect(older) as connection:
        connection.execute("UPDATE alembic_version SET version_num = '0003'")
    for url in [
        *(f"sqlite:///{path}" for path in (missing, empty, garbage, foreign, older)),
        "postgresql+psycopg://user@localhost/regtrack",
        "sqlite://",
        "sqlite:///:memory:",
        f"sqlite:///{older}?timeout=3",
    ]:
        with pytest.raises(NotStored):
            ReadOnlyStore.open(url)
    assert not missing.exists(), "opening it created the file"


def test_a_database_locked_by_a_writer_is_still_read(store: Store, url: str, tmp_path: Path) -> None:
    """WAL: a reader is never blocked by the one writer."""
    repo_id, _, _, _ = seed(store, tmp_path, [])
    path = url.removeprefix("sqlite:///")
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        with ReadOnlyStore.open(url) as quick:
            assert quick.repository(tmp_path) == repo_id
    finally:
        writer.execute("ROLLBACK")
        writer.close()
