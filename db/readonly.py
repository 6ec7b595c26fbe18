"""The store's reads through the standard library's sqlite3, for a command that finds every result
it needs stored.

Importing SQLAlchemy's ORM takes longer on a small machine than such a command should take in all
(a second identical bisect, a CI job asking again a question already answered). ``ReadOnlyStore``
answers the reads a bisect makes, over the same tables as ``db.store.Store`` and with the same
results, and writes nothing: whatever would need a write (a commit, tree, environment or probe
version not recorded yet, a case to claim and run, a session to keep or resume) raises
``NotStored``, and the caller starts again over ``Store``. So does anything unusual about the database (missing, another
schema revision, locked, damaged, not SQLite): ``Store`` migrates it or says what is wrong.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import fields
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeAlias

from db.chunks import chunked, keyed_filter, newest_first, portable_limits
from db.paths import default_db_url
from db.revision import head_revision
from tracker.core.records import (
    CaseKey,
    ClaimState,
    CommitInfo,
    EnvironmentInfo,
    InputRun,
    RunRecord,
    RunRow,
    SessionStatus,
    StaleOwner,
    StepRow,
    StepVerdict,
    StoredRun,
    TransitionRecord,
)
from tracker.core.verdicts import Outcome

if TYPE_CHECKING:
    from db.store import Store

AnyStore: TypeAlias = "Store | ReadOnlyStore"
"""What measuring and bisecting read results from."""

SQLITE_URL = "sqlite:///"

CopyLink: TypeAlias = "tuple[int | None, str]"
"""A run's ``reused_from_id`` (the run it copies; None: measured where it is stored) and the commit it is stored at."""

RUN_COLUMNS = (
    "runs.id, commits.sha, runs.tree_hash, runs.case_id, runs.settings_key, runs.outcome, runs.metrics, "
    "runs.signature, runs.duration_s, runs.started_at, runs.attempt, runs.seed, runs.trigger, runs.session_id, runs.detail"
)


class NotStored(Exception):
    """The command needs more than the read-only store holds or can do; run it over ``Store``."""


class ReadOnlyStore:
    """A SQLite store at the newest schema revision, read without SQLAlchemy; see the module's docstring."""

    def __init__(self, connection: sqlite3.Connection, where: str) -> None:
        self._connection = connection
        self.where = where

    @classmethod
    def open(cls, url: str | None = None) -> ReadOnlyStore:
        path = _sqlite_path(url or default_db_url())
        if path is None or not path.is_file():
            raise NotStored(f"no SQLite file at {url}")
        try:
            connection = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=0.1)
            portable_limits(connection)
            store = cls(connection, str(path))
            stored = store._rows("SELECT version_num FROM alembic_version")
        except sqlite3.Error as error:
            raise NotStored(f"{path}: {error}") from None
        if [row[0] for row in stored] != [head_revision()]:
            store.close()
            raise NotStored(f"{path} is not at the newest schema revision")
        return store

    def close(self) -> None:
        self._connection.close()

    def __enter__(self) -> ReadOnlyStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- what is recorded -------------------------------------------------------------------------

    def repository(self, path: Path) -> int:
        return self._one("SELECT id FROM repositories WHERE path = ?", str(path.resolve()))

    def stored_trees(self, repo_id: int, paths_key: str, shas: Sequence[str]) -> dict[str, str]:
        """As ``Store.stored_trees``."""
        query = (
            "SELECT commits.sha, target_trees.tree_hash FROM target_trees JOIN commits ON target_trees.commit_id = commits.id "
            "WHERE commits.repository_id = ? AND target_trees.paths_key = ? AND commits.sha IN ({})"
        )
        return self._in_chunks(query, list(shas), repo_id, paths_key)

    def environment(self, env: EnvironmentInfo) -> int:
        return self._one("SELECT id FROM environments WHERE fingerprint = ?", env.fingerprint)

    def probe_version(self, name: str, version: int, code_hash: str) -> int:
        return self._one(
            "SELECT id FROM probe_versions WHERE name = ? AND version = ? AND code_hash = ?", name, version, code_hash
        )

    def commit(self, repo_id: int, sha: str) -> CommitInfo | None:
        rows = self._rows(
            "SELECT sha, parents, subject, author, authored_at, pr_number, reverts_sha FROM commits "
            "WHERE repository_id = ? AND sha = ?",
            repo_id,
            sha,
        )
        if not rows:
            return None
        sha, parents, subject, author, authored_at, pr_number, reverts_sha = rows[0]
        return CommitInfo(sha, tuple(parents.split()), subject, author, _utc(authored_at), pr_number, reverts_sha)

    # -- results ----------------------------------------------------------------------------------

    def runs_for_tree(
        self, tree_hash: str, probe_id: int, environment_id: int, settings_keys: Sequence[str] | None = None
    ) -> list[StoredRun]:
        """As ``Store.runs_for_tree``: oldest first, whichever commit each was run at."""
        query = (
            f"SELECT {RUN_COLUMNS} FROM runs JOIN commits ON runs.commit_id = commits.id "
            "WHERE runs.tree_hash = ? AND runs.probe_id = ? AND runs.environment_id = ?"
        )
        values: list[Any] = [tree_hash, probe_id, environment_id]
        if settings_keys is not None:
            keys = sorted(set(settings_keys))
            query += f" AND runs.settings_key IN ({_marks(keys)})"
            values += keys
        return [_stored_run(row) for row in self._rows(query + " ORDER BY runs.id", *values)]

    def attempt_outcomes(self, probe_name: str, environment_id: int, dtype: str) -> list[tuple[str, str, int, str, Outcome]]:
        """As ``Store.attempt_outcomes``."""
        query = (
            "SELECT runs.tree_hash, runs.settings_key, runs.attempt, runs.case_id, runs.outcome FROM runs "
            "JOIN probe_versions ON runs.probe_id = probe_versions.id "
            "WHERE probe_versions.name = ? AND runs.environment_id = ? AND runs.dtype = ?"
        )
        rows = self._rows(query, probe_name, environment_id, dtype)
        return [(tree, key, attempt, case, Outcome(outcome)) for tree, key, attempt, case, outcome in rows]

    def input_runs(self, probe_id: int, environment_id: int, settings_keys: Sequence[str]) -> list[InputRun]:
        """As ``Store.input_runs``."""
        keys = sorted(set(settings_keys))
        query = (
            "SELECT tree_hash, case_id, settings_key, attempt, input_set_id, started_at FROM runs "
            f"WHERE probe_id = ? AND environment_id = ? AND input_set_id IS NOT NULL AND settings_key IN ({_marks(keys)})"
        )
        rows = self._rows(query, probe_id, environment_id, *keys)
        return [InputRun(tree, case, key, attempt, input_set, _utc(started)) for tree, case, key, attempt, input_set, started in rows]

    def input_sets(self, ids: Sequence[int]) -> dict[int, tuple[tuple[str, str], ...]]:
        """As ``Store.input_sets``."""
        rows = self._in_chunks("SELECT id, entries FROM input_sets WHERE id IN ({})", sorted(set(ids)))
        return {int(key): tuple((kind_path, state) for kind_path, state in json.loads(entries)) for key, entries in rows.items()}

    # -- questions about the history (``regtrack history``, ``show``, ``regressions``) ------------

    def runs(
        self,
        repo_id: int | None = None,
        probe: str | None = None,
        shas: list[str] | None = None,
        outcome: Outcome | str | None = None,
        limit: int | None = None,
        trees: list[str] | None = None,
    ) -> list[RunRow]:
        """As ``Store.runs``."""
        query = (
            f"SELECT {RUN_COLUMNS}, probe_versions.name, probe_versions.version, commits.subject, commits.pr_number, "
            "environments.fingerprint, environments.gpu_name FROM runs "
            "JOIN commits ON runs.commit_id = commits.id JOIN probe_versions ON runs.probe_id = probe_versions.id "
            "JOIN environments ON runs.environment_id = environments.id WHERE 1 = 1"
        )
        values: list[Any] = []
        for condition, value in (("commits.repository_id", repo_id), ("probe_versions.name", probe), ("runs.outcome", outcome and Outcome(outcome).value)):
            if value is not None:
                query += f" AND {condition} = ?"
                values.append(value)
        name, keys = keyed_filter(shas, trees)
        order = " ORDER BY runs.id DESC" + (f" LIMIT {int(limit)}" if limit is not None else "")
        if keys is None:
            rows = self._rows(query + order, *values)
        else:
            column = {"sha": "commits.sha", "tree_hash": "runs.tree_hash"}[name]
            rows = [row for chunk in chunked(keys) for row in self._rows(f"{query} AND {column} IN ({_marks(chunk)}){order}", *values, *chunk)]
        return newest_first([_run_row(row) for row in rows], limit)

    def copied_from(self, run_ids: Sequence[int]) -> dict[int, str]:
        """As ``Store.copied_from``."""
        query = "SELECT runs.id, runs.reused_from_id, commits.sha FROM runs JOIN commits ON runs.commit_id = commits.id WHERE runs.id IN ({})"

        def links(ids: Sequence[int]) -> dict[int, CopyLink]:
            return {run_id: (source, sha) for chunk in chunked(ids) for run_id, source, sha in self._rows(query.format(_marks(chunk)), *chunk)}

        return first_measured(run_ids, links)

    def probe_names(self, repo_id: int) -> list[str]:
        """As ``Store.probe_names``."""
        query = (
            "SELECT DISTINCT probe_versions.name FROM runs JOIN probe_versions ON runs.probe_id = probe_versions.id "
            "JOIN commits ON runs.commit_id = commits.id WHERE commits.repository_id = ? ORDER BY probe_versions.name"
        )
        return [name for (name,) in self._rows(query, repo_id)]

    def environments(self, repo_id: int) -> list[tuple[str, EnvironmentInfo]]:
        """As ``Store.environments``."""
        columns = ", ".join(f.name for f in fields(EnvironmentInfo))
        query = (
            f"SELECT fingerprint, {columns} FROM environments WHERE id IN "
            "(SELECT runs.environment_id FROM runs JOIN commits ON runs.commit_id = commits.id WHERE commits.repository_id = ?) ORDER BY id"
        )
        return [(row[0], _environment(row[1:])) for row in self._rows(query, repo_id)]

    def transitions(self, repo_id: int, target: str | None = None, probe: str | None = None) -> list[TransitionRecord]:
        """As ``Store.transitions``."""
        query = (
            "SELECT probe, sha, kind, pairs_with, pair_kind, candidates, authored_at, trigger, found_at FROM transitions "
            "WHERE repository_id = ?"
        )
        values: list[Any] = [repo_id]
        for condition, value in (("target", target), ("probe", probe)):
            if value is not None:
                query += f" AND {condition} = ?"
                values.append(value)
        return [
            TransitionRecord(probe_name, sha, kind, pairs_with, pair_kind, tuple(json.loads(candidates)), _utc(authored), trigger, _utc(found))
            for probe_name, sha, kind, pairs_with, pair_kind, candidates, authored, trigger, found in self._rows(
                query + " ORDER BY authored_at, id", *values
            )
        ]

    # -- what needs the full store ----------------------------------------------------------------

    def copy_attempt(self, repo_id: int, sha: str, tree_hash: str, run_ids: Sequence[int], session_id: int | None, trigger: str) -> None:
        _needs_a_write("a reused result to store")

    def input_set(self, digest: str, entries: Sequence[tuple[str, str]]) -> int:
        _needs_a_write("an input set to store")

    def claim(
        self, key: CaseKey, attempt: int, owner: str, expires_at: datetime, stale: StaleOwner, session_id: int | None = None
    ) -> ClaimState:
        _needs_a_write("a case to run")

    def new_attempt(self, keys: Sequence[CaseKey], stale: StaleOwner) -> int:
        _needs_a_write("a case to run")

    def add_run(self, run: RunRecord, owner: str | None = None) -> int | None:
        _needs_a_write("a run to store")

    def record_commits(self, repo_id: int, infos: list[CommitInfo]) -> None:
        _needs_a_write("commits to record")

    def record_trees(self, repo_id: int, paths_key: str, trees: Mapping[str, str]) -> None:
        _needs_a_write("target trees to record")

    def release_claims(self, owner: str, keys: Sequence[CaseKey] | None = None, attempt: int | None = None) -> None:
        """Nothing to release: this store never claims."""

    def start_session(
        self, repo_id: int, target: str, probe_id: int, good_sha: str, bad_sha: str, strategy: str,
        options: dict[str, Any] | None = None, driver: str | None = None,
    ) -> int:  # fmt: skip
        _needs_a_write("a session to keep")

    def take_session(self, session_id: int, driver: str, stale: StaleOwner) -> str | None:
        _needs_a_write("a session to drive")

    def steps(self, session_id: int) -> list[StepRow]:
        _needs_a_write("a session to replay")

    def add_step(
        self, session_id: int, sha: str, verdict: StepVerdict, reused: bool, attempt: int | None = None, round: int | None = None
    ) -> None:
        _needs_a_write("a session to keep")

    def session_attempts(self, session_id: int) -> int:
        _needs_a_write("a session to count")

    def finish_session(self, session_id: int, status: SessionStatus, result: dict[str, Any]) -> None:
        _needs_a_write("a session to finish")

    # -- queries ----------------------------------------------------------------------------------

    def _one(self, query: str, *values: Any) -> int:
        rows = self._rows(query, *values)
        if not rows:
            raise NotStored("not recorded yet")
        return int(rows[0][0])

    def _rows(self, query: str, *values: Any) -> list[tuple[Any, ...]]:
        with self._translated():
            return self._connection.execute(query, values).fetchall()

    def _in_chunks(self, query: str, keys: Sequence[Any], *values: Any) -> dict[Any, Any]:
        """The (key, value) rows of ``query`` (one ``IN ({})`` for the keys, after ``values``), a chunk at a time."""
        found: dict[Any, Any] = {}
        for chunk in chunked(keys):
            found.update(self._rows(query.format(_marks(chunk)), *values, *chunk))
        return found

    @contextmanager
    def _translated(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as error:
            raise NotStored(f"{self.where}: {error}") from None


def _sqlite_path(url: str) -> Path | None:
    """The file of a plain ``sqlite:///PATH`` URL (``sqlite:////abs`` or ``sqlite:///rel``); None for any other URL."""
    if not url.startswith(SQLITE_URL) or "?" in url:
        return None
    database = url[len(SQLITE_URL) :]
    return Path(database) if database not in ("", ":memory:") else None


def _stored_run(row: tuple[Any, ...]) -> StoredRun:
    run_id, sha, tree, case, key, outcome, metrics, signature, duration, started, attempt, seed, trigger, session, detail = row
    return StoredRun(
        run_id, sha, tree, case, key, Outcome(outcome), json.loads(metrics), signature, duration, _utc(started),
        attempt, seed, trigger, session, detail,
    )  # fmt: skip


def _run_row(row: tuple[Any, ...]) -> RunRow:
    probe_name, probe_version, subject, pr_number, fingerprint, gpu_name = row[-6:]
    return RunRow(**vars(_stored_run(row[:-6])), probe_name=probe_name, probe_version=probe_version, subject=subject,
                  pr_number=pr_number, fingerprint=fingerprint, gpu_name=gpu_name)  # fmt: skip


def _environment(row: tuple[Any, ...]) -> EnvironmentInfo:
    """The columns of ``EnvironmentInfo`` in its fields' order; ``facts`` as SQLAlchemy stores JSON."""
    *described, facts = row
    return EnvironmentInfo(*described, facts=None if facts is None else json.loads(facts))


def first_measured(run_ids: Sequence[int], links: Callable[[Sequence[int]], Mapping[int, CopyLink]]) -> dict[int, str]:
    """For each of ``run_ids`` that copies another run, the commit the first run of its chain of
    copies was measured at. A copy names a run stored before it, so every chain ends."""
    found: dict[int, str] = {}
    looking_at = {run_id: run_id for run_id in run_ids}
    while looking_at:
        known = links(sorted(set(looking_at.values())))
        following = {}
        for asked, run_id in looking_at.items():
            if run_id not in known:
                continue
            source, sha = known[run_id]
            if source is not None:
                following[asked] = source
            elif run_id != asked:
                found[asked] = sha
        looking_at = following
    return found


def _marks(values: Sequence[Any]) -> str:
    return ", ".join("?" * len(values))


def _utc(stored: str) -> datetime:
    """A datetime as SQLAlchemy stores it on SQLite (UTC, no offset), timezone-aware."""
    return datetime.fromisoformat(stored).replace(tzinfo=timezone.utc)


def _needs_a_write(what: str) -> NoReturn:
    raise NotStored(f"{what}: the read-only store writes nothing")
