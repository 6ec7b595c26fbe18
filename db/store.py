"""The store: the one way results get into and out of the database.

Every method runs in its own transaction; on SQLite, writers take the lock up front
(``BEGIN IMMEDIATE``) so that a busy database waits, then fails whole, never half-written.
"""

from __future__ import annotations

import enum
import hashlib
import json
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from dataclasses import fields as dataclass_fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, cast

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import ColumnElement, Connection, Engine, create_engine, delete, event, func, insert, select, update
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DatabaseError, IntegrityError
from sqlalchemy.orm import Session

from db.models import (
    BisectSession,
    BisectStep,
    Claim,
    Commit,
    Environment,
    ProbeVersion,
    Repository,
    Run,
    TargetTree,
    TrackState,
    TransitionRow,
)
from db.paths import default_db_url
from probes.api import Outcome
from tracker.core.errors import UsageError

Verdict = Literal["good", "bad", "skip"]
FINISHED = "finished"
"""``Store.take_session``'s answer for a session that another process finished meanwhile."""
SessionStatus = Literal["running", "done", "failed"]


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    parents: tuple[str, ...]
    subject: str
    author: str
    authored_at: datetime
    pr_number: int | None = None
    reverts_sha: str | None = None


@dataclass(frozen=True)
class EnvironmentInfo:
    device: str
    gpu_name: str | None = None
    compute_capability: str | None = None
    driver: str | None = None
    cuda: str | None = None
    torch: str | None = None
    flashinfer: str | None = None
    python: str | None = None
    host: str | None = None

    @property
    def fingerprint(self) -> str:
        """Identifies the software and hardware stack; machines with the same stack share it."""
        fields = {name: value for name, value in asdict(self).items() if name != "host"}
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class CaseKey:
    """One case of one tree, measured one way: stored runs with this key answer for each other."""

    tree_hash: str
    probe_id: int
    environment_id: int
    settings_key: str
    case_id: str


class ClaimState(str, enum.Enum):
    CLAIMED = "claimed"
    """This process now owns the attempt: it runs the case and stores the run."""
    STORED = "stored"
    """The attempt is stored already."""
    HELD = "held"
    """Another live process owns it: wait for its run."""


StaleOwner = Callable[[str, datetime], bool]
"""Whether a claim's (owner, expires_at) belongs to a process that is gone."""


@dataclass(frozen=True)
class RunRecord:
    repo_id: int
    sha: str
    tree_hash: str
    environment_id: int
    probe_id: int
    case_id: str
    settings_key: str
    dtype: str | None
    outcome: Outcome
    metrics: dict[str, Any]
    signature: str | None
    detail: str
    duration_s: float
    started_at: datetime
    attempt: int
    seed: int
    trigger: str
    session_id: int | None = None


@dataclass(frozen=True)
class StoredRun:
    id: int
    sha: str
    tree_hash: str
    case_id: str
    settings_key: str
    outcome: Outcome
    metrics: dict[str, Any]
    signature: str | None
    duration_s: float
    started_at: datetime
    attempt: int
    seed: int
    trigger: str
    session_id: int | None


@dataclass(frozen=True)
class RunRow(StoredRun):
    probe_name: str
    probe_version: int
    subject: str
    pr_number: int | None
    fingerprint: str
    gpu_name: str | None
    detail: str


@dataclass(frozen=True)
class SessionRow:
    id: int
    repo_id: int
    target: str
    probe_id: int
    probe_name: str
    good_sha: str
    bad_sha: str
    strategy: str
    options: dict[str, Any] | None
    status: str
    driver: str | None
    started_at: datetime
    finished_at: datetime | None
    result: dict[str, Any] | None


@dataclass(frozen=True)
class StepRow:
    position: int
    sha: str
    verdict: str
    reused: bool
    created_at: datetime
    attempt: int | None = None
    round: int | None = None


TransitionKind = Literal["regression", "fix"]


@dataclass(frozen=True)
class TransitionRecord:
    """A transition as scans and the scheduled job store it; ``candidates`` lists the commits it may
    be when untestable ones hide it."""

    probe: str
    sha: str
    kind: TransitionKind
    pairs_with: str | None
    pair_kind: str | None
    candidates: tuple[str, ...]
    authored_at: datetime
    trigger: str
    found_at: datetime | None = None


def upgrade(url: str | None = None, *, busy_timeout_ms: int = 5000) -> None:
    """Migrate the database at ``url`` (default: ``db.paths.default_db_url()``) to the newest schema."""
    Store.open(url, busy_timeout_ms=busy_timeout_ms).close()


class Store:
    def __init__(self, engine: Engine, where: str) -> None:
        self._engine = engine
        self._writer = engine.execution_options(regtrack_write=True)
        self.where = where

    @classmethod
    def open(cls, url: str | None = None, *, busy_timeout_ms: int = 5000) -> Store:
        engine, where = _connect(url or default_db_url(), busy_timeout_ms)
        try:
            with _translated(where):
                _upgrade(engine, where)
        except BaseException:
            engine.dispose()
            raise
        return cls(engine, where)

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def repository(self, path: Path) -> int:
        resolved = path.resolve()
        with self._writing() as session:
            found = session.scalar(select(Repository.id).where(Repository.path == str(resolved)))
            if found is not None:
                return found
            return _added(session, Repository(path=str(resolved), name=resolved.name))

    def record_commits(self, repo_id: int, infos: list[CommitInfo]) -> None:
        """Insert new commits and refresh the metadata of known ones."""
        rows = {info.sha: _commit_values(repo_id, info) for info in infos}
        with self._writing() as session:
            known = _commit_ids(session, repo_id, list(rows))
            new = [row for sha, row in rows.items() if sha not in known]
            old = [{**row, "id": known[sha]} for sha, row in rows.items() if sha in known]
            if new:
                session.execute(insert(Commit), new)
            if old:
                session.execute(update(Commit), old)

    def record_tree(self, repo_id: int, sha: str, paths_key: str, tree_hash: str) -> None:
        with self._writing() as session:
            commit_id = _commit_id(session, repo_id, sha)
            session.merge(TargetTree(commit_id=commit_id, paths_key=paths_key, tree_hash=tree_hash))

    def tree_hash(self, repo_id: int, sha: str, paths_key: str) -> str | None:
        query = (
            select(TargetTree.tree_hash)
            .join(Commit, TargetTree.commit_id == Commit.id)
            .where(Commit.repository_id == repo_id, Commit.sha == sha, TargetTree.paths_key == paths_key)
        )
        with self._reading() as session:
            return session.scalar(query)

    def environment(self, env: EnvironmentInfo) -> int:
        fingerprint = env.fingerprint
        with self._writing() as session:
            found = session.scalar(select(Environment.id).where(Environment.fingerprint == fingerprint))
            if found is not None:
                return found
            return _added(session, Environment(fingerprint=fingerprint, **asdict(env)))

    def probe_version(self, name: str, version: int, code_hash: str) -> int:
        key = {"name": name, "version": version, "code_hash": code_hash}
        with self._writing() as session:
            found = session.scalar(select(ProbeVersion.id).filter_by(**key))
            if found is not None:
                return found
            return _added(session, ProbeVersion(**key))

    def add_run(self, run: RunRecord, owner: str | None = None) -> int | None:
        """Store one run. With ``owner``, only while that owner still holds the attempt's claim,
        which is released in the same transaction; None when another process took it over."""
        values = asdict(run)
        del values["repo_id"], values["sha"]
        values["outcome"] = Outcome(run.outcome).value
        key = CaseKey(run.tree_hash, run.probe_id, run.environment_id, run.settings_key, run.case_id)
        with self._writing() as session:
            if owner is not None:
                claim = session.scalar(_claim_query(key, run.attempt))
                if claim is None or claim.owner != owner:
                    return None
                session.delete(claim)
            return _added(session, Run(commit_id=_commit_id(session, run.repo_id, run.sha), **values))

    def runs_for_tree(
        self, tree_hash: str, probe_id: int, environment_id: int, settings_keys: Sequence[str] | None = None
    ) -> list[StoredRun]:
        """Every stored run of this tree, probe version and environment (and, if given, one of the
        settings keys), whichever commit it was run at, oldest first."""
        query = (
            select(Run, Commit.sha)
            .join(Commit, Run.commit_id == Commit.id)
            .where(Run.tree_hash == tree_hash, Run.probe_id == probe_id, Run.environment_id == environment_id)
            .order_by(Run.id)
        )
        if settings_keys is not None:
            query = query.where(Run.settings_key.in_(sorted(set(settings_keys))))
        with self._reading() as session:
            return [StoredRun(**_stored_fields(run, sha)) for run, sha in session.execute(query)]

    def claim(
        self, key: CaseKey, attempt: int, owner: str, expires_at: datetime, stale: StaleOwner, session_id: int | None = None
    ) -> ClaimState:
        """Take the attempt ``attempt`` of ``key`` for ``owner`` unless it is stored or a live
        process holds it; a stale holder's claim is taken over."""
        try:
            with self._writing() as session:
                if session.scalar(select(Run.id).where(*_key_where(Run, key), Run.attempt == attempt)) is not None:
                    return ClaimState.STORED
                held = session.scalar(_claim_query(key, attempt))
                if held is not None and not stale(held.owner, held.expires_at):
                    return ClaimState.HELD
                if held is not None:
                    session.delete(held)
                    session.flush()
                session.add(
                    Claim(**asdict(key), attempt=attempt, session_id=session_id, owner=owner, claimed_at=_now(), expires_at=expires_at)
                )
        except IntegrityError:
            return ClaimState.HELD
        return ClaimState.CLAIMED

    def new_attempt(self, keys: Sequence[CaseKey]) -> int:
        """One past every attempt stored or claimed for these cases."""
        with self._reading() as session:
            highest = [session.scalar(select(func.max(table.attempt)).where(*_keys_where(table, keys))) for table in (Run, Claim)]
        return 1 + max((h for h in highest if h is not None), default=0)

    def release_claims(self, owner: str, keys: Sequence[CaseKey] | None = None, attempt: int | None = None) -> None:
        """Give up the claims of ``owner`` whose runs it did not store (on an error or Ctrl-C):
        all of them, or those of ``keys`` at ``attempt``."""
        where = [Claim.owner == owner]
        if keys is not None:
            where += [*_keys_where(Claim, keys), Claim.attempt == attempt]
        with self._writing() as session:
            session.execute(delete(Claim).where(*where))

    def attempt_outcomes(self, probe_name: str, environment_id: int, dtype: str) -> list[tuple[str, str, int, str, Outcome]]:
        """Every stored case outcome of the probe (any version) in one environment at one dtype, as
        (tree, settings key, attempt, case, outcome): the history a probe's flake rate is read from."""
        query = (
            select(Run.tree_hash, Run.settings_key, Run.attempt, Run.case_id, Run.outcome)
            .join(ProbeVersion, Run.probe_id == ProbeVersion.id)
            .where(ProbeVersion.name == probe_name, Run.environment_id == environment_id, Run.dtype == dtype)
        )
        with self._reading() as session:
            return [(tree, key, attempt, case, Outcome(outcome)) for tree, key, attempt, case, outcome in session.execute(query)]

    def runs(
        self,
        repo_id: int | None = None,
        probe: str | None = None,
        shas: list[str] | None = None,
        outcome: Outcome | str | None = None,
        limit: int | None = None,
        trees: list[str] | None = None,
    ) -> list[RunRow]:
        """Stored runs, newest first, filtered by repository, probe name, commits, outcome and
        target trees (a run at one commit holds for every commit with its tree)."""
        query = (
            select(Run, Commit, ProbeVersion, Environment)
            .join(Commit, Run.commit_id == Commit.id)
            .join(ProbeVersion, Run.probe_id == ProbeVersion.id)
            .join(Environment, Run.environment_id == Environment.id)
            .order_by(Run.id.desc())
            .limit(limit)
        )
        if repo_id is not None:
            query = query.where(Commit.repository_id == repo_id)
        if probe is not None:
            query = query.where(ProbeVersion.name == probe)
        if shas is not None:
            query = query.where(Commit.sha.in_(shas))
        if outcome is not None:
            query = query.where(Run.outcome == Outcome(outcome).value)
        if trees is not None:
            query = query.where(Run.tree_hash.in_(trees))
        with self._reading() as session:
            return [
                RunRow(
                    **_stored_fields(run, commit.sha),
                    probe_name=probe_row.name,
                    probe_version=probe_row.version,
                    subject=commit.subject,
                    pr_number=commit.pr_number,
                    fingerprint=env.fingerprint,
                    gpu_name=env.gpu_name,
                    detail=run.detail,
                )
                for run, commit, probe_row, env in session.execute(query)
            ]

    def commit(self, repo_id: int, sha: str) -> CommitInfo | None:
        with self._reading() as session:
            row = session.scalar(select(Commit).where(Commit.repository_id == repo_id, Commit.sha == sha))
            if row is None:
                return None
            return CommitInfo(
                sha=row.sha,
                parents=tuple(row.parents.split()),
                subject=row.subject,
                author=row.author,
                authored_at=row.authored_at,
                pr_number=row.pr_number,
                reverts_sha=row.reverts_sha,
            )

    def start_session(
        self,
        repo_id: int,
        target: str,
        probe_id: int,
        good_sha: str,
        bad_sha: str,
        strategy: str,
        options: dict[str, Any] | None = None,
        driver: str | None = None,
    ) -> int:
        row = BisectSession(
            repository_id=repo_id,
            target=target,
            probe_id=probe_id,
            good_sha=good_sha,
            bad_sha=bad_sha,
            strategy=strategy,
            options=options,
            status="running",
            driver=driver,
            started_at=_now(),
        )
        with self._writing() as session:
            return _added(session, row)

    def take_session(self, session_id: int, driver: str, stale: StaleOwner) -> str | None:
        """Make ``driver`` the one process driving the unfinished session; else who holds it: a
        live driver (a stale one is replaced), or ``FINISHED``."""
        with self._writing() as session:
            row = _bisect_session(session, session_id)
            if row.status != "running":
                return FINISHED
            if row.driver not in (None, driver) and not stale(row.driver, _FAR_FUTURE):
                return row.driver
            row.driver = driver
            return None

    def session_attempts(self, session_id: int) -> int:
        """How many attempts (a tree measured once, whatever its cases) the session executed."""
        query = select(func.count()).select_from(
            select(Run.tree_hash, Run.attempt).where(Run.session_id == session_id).distinct().subquery()
        )
        with self._reading() as session:
            return session.scalar(query) or 0

    def add_step(
        self, session_id: int, sha: str, verdict: Verdict, reused: bool, attempt: int | None = None, round: int | None = None
    ) -> None:
        with self._writing() as session:
            position = session.scalar(select(func.count()).where(BisectStep.session_id == session_id))
            session.add(
                BisectStep(
                    session_id=session_id,
                    position=position,
                    sha=sha,
                    verdict=verdict,
                    reused=reused,
                    attempt=attempt,
                    round=round,
                    created_at=_now(),
                )
            )

    def steps(self, session_id: int) -> list[StepRow]:
        query = select(BisectStep).where(BisectStep.session_id == session_id).order_by(BisectStep.position)
        with self._reading() as session:
            return [
                StepRow(
                    position=s.position,
                    sha=s.sha,
                    verdict=s.verdict,
                    reused=s.reused,
                    created_at=s.created_at,
                    attempt=s.attempt,
                    round=s.round,
                )
                for s in session.scalars(query)
            ]

    def finish_session(self, session_id: int, status: SessionStatus, result: dict[str, Any]) -> None:
        with self._writing() as session:
            row = _bisect_session(session, session_id)
            row.status = status
            row.finished_at = _now()
            row.result = result
            row.driver = None

    def session(self, session_id: int) -> SessionRow:
        with self._reading() as session:
            row = _bisect_session(session, session_id)
            probe = session.get_one(ProbeVersion, row.probe_id)
            return _session_row(row, probe.name)

    def open_sessions(self, repo_id: int, target: str, probe_id: int) -> list[SessionRow]:
        """Unfinished bisect sessions, newest first."""
        with self._reading() as session:
            return _session_rows(
                session,
                BisectSession.repository_id == repo_id,
                BisectSession.target == target,
                BisectSession.probe_id == probe_id,
                BisectSession.status == "running",
                newest_first=True,
            )

    def sessions(self, repo_id: int, target: str | None = None) -> list[SessionRow]:
        """Every bisect session of the repository (of one target, if given), oldest first."""
        where = [BisectSession.repository_id == repo_id]
        if target is not None:
            where.append(BisectSession.target == target)
        with self._reading() as session:
            return _session_rows(session, *where)

    def environments(self, repo_id: int) -> list[tuple[str, EnvironmentInfo]]:
        """The fingerprint and description of every environment that ran this repository's commits,
        in the order they were first stored."""
        used = select(Run.environment_id).join(Commit, Run.commit_id == Commit.id).where(Commit.repository_id == repo_id)
        query = select(Environment).where(Environment.id.in_(used)).order_by(Environment.id)
        with self._reading() as session:
            return [(env.fingerprint, _environment_info(env)) for env in session.scalars(query)]

    def last_tracked(self, repo_id: int, target: str, branch: str) -> str | None:
        with self._reading() as session:
            return session.scalar(
                select(TrackState.last_sha).where(
                    TrackState.repository_id == repo_id, TrackState.target == target, TrackState.branch == branch
                )
            )

    def set_tracked(self, repo_id: int, target: str, branch: str, sha: str) -> None:
        with self._writing() as session:
            session.merge(TrackState(repository_id=repo_id, target=target, branch=branch, last_sha=sha, updated_at=_now()))

    def record_transitions(self, repo_id: int, target: str, transitions: list[TransitionRecord]) -> list[TransitionRecord]:
        """Store the transitions not stored before; returns those that are new."""
        new = []
        with self._writing() as session:
            for t in transitions:
                exists = session.scalar(
                    select(TransitionRow.id).where(
                        TransitionRow.repository_id == repo_id,
                        TransitionRow.target == target,
                        TransitionRow.probe == t.probe,
                        TransitionRow.sha == t.sha,
                        TransitionRow.kind == t.kind,
                    )
                )
                if exists is None:
                    found_at = _now()
                    values = {**asdict(t), "candidates": list(t.candidates), "found_at": found_at}
                    session.add(TransitionRow(repository_id=repo_id, target=target, **values))
                    new.append(TransitionRecord(**{**asdict(t), "found_at": found_at}))
        return new

    def transitions(self, repo_id: int, target: str | None = None, probe: str | None = None) -> list[TransitionRecord]:
        """Stored transitions, oldest commit first."""
        query = select(TransitionRow).where(TransitionRow.repository_id == repo_id)
        if target is not None:
            query = query.where(TransitionRow.target == target)
        if probe is not None:
            query = query.where(TransitionRow.probe == probe)
        with self._reading() as session:
            rows = session.scalars(query.order_by(TransitionRow.authored_at, TransitionRow.id)).all()
            return [
                TransitionRecord(
                    r.probe, r.sha, cast(TransitionKind, r.kind), r.pairs_with, r.pair_kind, tuple(r.candidates), r.authored_at, r.trigger, r.found_at
                )
                for r in rows
            ]

    @contextmanager
    def _reading(self) -> Iterator[Session]:
        with _translated(self.where), Session(self._engine) as session:
            yield session

    @contextmanager
    def _writing(self) -> Iterator[Session]:
        with (
            _translated(self.where),
            Session(self._writer, expire_on_commit=False) as session,
            session.begin(),
        ):
            yield session


def _connect(url: str, busy_timeout_ms: int) -> tuple[Engine, str]:
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise UsageError(f"invalid database URL {url!r}; use e.g. sqlite:////abs/path/regtrack.db") from None
    where = _where(parsed)
    if parsed.get_backend_name() == "sqlite":
        _make_parent(parsed, where)
        _refuse_foreign_sqlite(parsed, where)
    try:
        engine = create_engine(parsed)
    except (ArgumentError, ImportError) as exc:
        raise UsageError(
            f"cannot use database {where} ({exc}); install its driver or fix REGTRACK_DB_URL"
        ) from None
    if parsed.get_backend_name() == "sqlite":
        _configure_sqlite(engine, busy_timeout_ms)
    return engine, where


def _where(url: URL) -> str:
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
        return str(url.database)
    return url.render_as_string(hide_password=True)


def _make_parent(url: URL, where: str) -> None:
    if url.database in (None, "", ":memory:"):
        return
    parent = Path(url.database).parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(
            f"cannot create directory {parent} for database {where} ({exc.strerror}); "
            "create it or set REGTRACK_DB_URL to a writable location"
        ) from None


def _refuse_foreign_sqlite(url: URL, where: str) -> None:
    """Refuse a file that is not a SQLite database, or one holding tables but no regtrack schema,
    before anything (such as switching it to WAL) changes it."""
    if url.database in (None, "", ":memory:") or not Path(url.database).is_file():
        return
    if Path(url.database).stat().st_size == 0:
        return
    try:
        connection = sqlite3.connect(f"file:{Path(url.database).absolute()}?mode=ro", uri=True)
        try:
            tables = {name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            connection.close()
    except sqlite3.DatabaseError as exc:
        reason = str(exc) or type(exc).__name__
        if "locked" in reason:
            return
        raise UsageError(
            f"database {where} cannot be read as SQLite ({reason}); restore it or set REGTRACK_DB_URL to another file"
        ) from None
    if tables and "alembic_version" not in tables:
        shown = ", ".join(sorted(tables)[:3])
        raise UsageError(
            f"database {where} is not a regtrack database (it holds tables {shown}); "
            "set REGTRACK_DB_URL to a regtrack database or a new file"
        )


def _configure_sqlite(engine: Engine, busy_timeout_ms: int) -> None:
    """WAL, a busy timeout, foreign keys, and transactions that SQLAlchemy (not sqlite3) begins."""

    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection: Any, _record: object) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        cursor.execute("PRAGMA foreign_keys = ON")
        _switch_to_wal(cursor, busy_timeout_ms)
        cursor.close()

    @event.listens_for(engine, "begin")
    def on_begin(connection: Connection) -> None:
        write = connection.get_execution_options().get("regtrack_write", False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def _switch_to_wal(cursor: Any, busy_timeout_ms: int) -> None:
    """WAL is a property of the file, set by the first connection. Switching needs the file to
    itself and SQLite's busy handler does not wait for that, so concurrent first opens retry; an
    in-memory database stays in memory mode."""
    deadline = time.monotonic() + busy_timeout_ms / 1000
    while True:
        try:
            mode = cursor.execute("PRAGMA journal_mode = WAL").fetchone()[0].lower()
        except sqlite3.OperationalError:
            mode = "busy"
        if mode in ("wal", "memory") or time.monotonic() > deadline:
            return
        time.sleep(0.01)


def _upgrade(engine: Engine, where: str) -> None:
    """Migrate to head; a database already at head is only read."""
    config = Config()
    config.set_main_option("script_location", "db:migrations")
    script = ScriptDirectory.from_config(config)
    with engine.connect() as connection:
        current = MigrationContext.configure(connection).get_current_revision()
    if current == script.get_current_head():
        return
    if current is not None and current not in {rev.revision for rev in script.walk_revisions()}:
        raise UsageError(
            f"database {where} has schema revision {current!r}, unknown to this regtrack; "
            "upgrade regtrack or set REGTRACK_DB_URL to another database"
        )
    with engine.execution_options(regtrack_write=True).begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


@contextmanager
def _translated(where: str) -> Iterator[None]:
    try:
        yield
    except IntegrityError:
        raise
    except DatabaseError as exc:
        raise UsageError(_explain(exc, where)) from exc


def _explain(exc: DatabaseError, where: str) -> str:
    reason = (str(exc.orig) or type(exc.orig).__name__).splitlines()[0]
    if "not a database" in reason or "malformed" in reason:
        return f"database {where} is damaged ({reason}); restore it from a backup or set REGTRACK_DB_URL to another file"
    if "locked" in reason:
        return f"database {where} is locked by another process; wait for it to finish or set REGTRACK_DB_URL to another file"
    if "unable to open" in reason or "readonly" in reason:
        return f"database {where} cannot be written ({reason}); fix its permissions or set REGTRACK_DB_URL to a writable file"
    return f"database {where} cannot be used ({reason}); check it or set REGTRACK_DB_URL to another database"


def _now() -> datetime:
    return datetime.now(timezone.utc)


_FAR_FUTURE = datetime.max.replace(tzinfo=timezone.utc)
"""A session's driver has no expiry: it is stale only when its process is known to be gone."""


def _added(session: Session, row: Repository | Environment | ProbeVersion | Run | BisectSession) -> int:
    session.add(row)
    session.flush()
    return row.id


def _commit_values(repo_id: int, info: CommitInfo) -> dict[str, Any]:
    return {**asdict(info), "repository_id": repo_id, "parents": " ".join(info.parents)}


def _commit_ids(session: Session, repo_id: int, shas: list[str], chunk: int = 500) -> dict[str, int]:
    ids: dict[str, int] = {}
    for start in range(0, len(shas), chunk):
        query = select(Commit.sha, Commit.id).where(
            Commit.repository_id == repo_id, Commit.sha.in_(shas[start : start + chunk])
        )
        ids.update(session.execute(query).all())
    return ids


def _commit_id(session: Session, repo_id: int, sha: str) -> int:
    found = session.scalar(select(Commit.id).where(Commit.repository_id == repo_id, Commit.sha == sha))
    if found is None:
        raise LookupError(f"commit {sha} of repository {repo_id} is not recorded; record_commits it first")
    return found


def _stored_fields(run: Run, sha: str) -> dict[str, Any]:
    return {
        "id": run.id,
        "sha": sha,
        "tree_hash": run.tree_hash,
        "case_id": run.case_id,
        "settings_key": run.settings_key,
        "outcome": Outcome(run.outcome),
        "metrics": run.metrics,
        "signature": run.signature,
        "duration_s": run.duration_s,
        "started_at": run.started_at,
        "attempt": run.attempt,
        "seed": run.seed,
        "trigger": run.trigger,
        "session_id": run.session_id,
    }


def _key_where(table: type[Run] | type[Claim], key: CaseKey) -> list[ColumnElement[bool]]:
    return [getattr(table, name) == value for name, value in asdict(key).items()]


def _keys_where(table: type[Run] | type[Claim], keys: Sequence[CaseKey]) -> list[ColumnElement[bool]]:
    """The cases of one tree measured one way (one probe, environment) under any of their settings."""
    first = keys[0]
    return [
        table.tree_hash == first.tree_hash,
        table.probe_id == first.probe_id,
        table.environment_id == first.environment_id,
        table.settings_key.in_(sorted({k.settings_key for k in keys})),
        table.case_id.in_(sorted({k.case_id for k in keys})),
    ]


def _claim_query(key: CaseKey, attempt: int) -> Any:
    return select(Claim).where(*_key_where(Claim, key), Claim.attempt == attempt)


def _bisect_session(session: Session, session_id: int) -> BisectSession:
    row = session.get(BisectSession, session_id)
    if row is None:
        raise LookupError(f"no bisect session {session_id}")
    return row


def _session_rows(session: Session, *where: ColumnElement[bool], newest_first: bool = False) -> list[SessionRow]:
    query = (
        select(BisectSession, ProbeVersion.name)
        .join(ProbeVersion, BisectSession.probe_id == ProbeVersion.id)
        .where(*where)
        .order_by(BisectSession.id.desc() if newest_first else BisectSession.id)
    )
    return [_session_row(row, name) for row, name in session.execute(query)]


def _session_row(row: BisectSession, probe_name: str) -> SessionRow:
    return SessionRow(
        id=row.id,
        repo_id=row.repository_id,
        target=row.target,
        probe_id=row.probe_id,
        probe_name=probe_name,
        good_sha=row.good_sha,
        bad_sha=row.bad_sha,
        strategy=row.strategy,
        options=row.options,
        status=row.status,
        driver=row.driver,
        started_at=row.started_at,
        finished_at=row.finished_at,
        result=row.result,
    )


def _environment_info(row: Environment) -> EnvironmentInfo:
    return EnvironmentInfo(**{f.name: getattr(row, f.name) for f in dataclass_fields(EnvironmentInfo)})
