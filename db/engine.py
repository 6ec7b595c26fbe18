"""The database connection: URLs, SQLite's settings (WAL, a busy timeout, writers that take the
lock up front), PostgreSQL's, migrations, and the errors a user can mend turned into one line.

Every store method runs in its own transaction, and writers take one at a time: on SQLite by
taking the lock up front (``BEGIN IMMEDIATE``), so that a busy database waits, then fails whole,
never half-written; on PostgreSQL by taking a transaction-level advisory lock as their first
statement. Each writer therefore sees every write committed before it, and the store's
look-up-then-insert methods (a commit, a tree, an environment) need no retry loop on either.
"""

from __future__ import annotations

import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import fields as dataclass_fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event, inspect, select, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DatabaseError, IntegrityError
from sqlalchemy.orm import Session

from db.chunks import chunked, portable_limits
from db.models import BisectSession, Commit, Environment, ProbeVersion, Repository, Run
from db.paths import data_dir, default_db_url
from db.revision import head_revision
from tracker.core.errors import UsageError

D = TypeVar("D", bound="Database")
R = TypeVar("R")
K = TypeVar("K")


class Database:
    """An open database, migrated to the newest schema."""

    def __init__(self, engine: Engine, where: str) -> None:
        self._engine = engine
        self._writer = engine.execution_options(regtrack_write=True)
        self.where = where

    @classmethod
    def open(cls: type[D], url: str | None = None, *, busy_timeout_ms: int = 5000) -> D:
        engine, where = _connect(url or default_db_url(), busy_timeout_ms)
        try:
            with translated(where):
                _upgrade(engine, where)
        except BaseException:
            engine.dispose()
            raise
        return cls(engine, where)

    def close(self) -> None:
        self._engine.dispose()

    @property
    def shared(self) -> bool:
        """A server several hosts may write to (PostgreSQL), not a file of this host."""
        return self._engine.dialect.name == "postgresql"

    @contextmanager
    def advisory_lock(self, key: int, wait: bool) -> Iterator[bool]:
        """Hold PostgreSQL's session-level advisory lock ``key`` on a connection of its own for the
        block; yields False (and holds nothing) when ``wait`` is False and another session has it.
        The server releases it if this process dies."""
        with translated(self.where), self._engine.connect() as connection:
            if wait:
                connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": key})
                held = True
            else:
                held = bool(connection.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": key}).scalar())
            connection.commit()
            try:
                yield held
            finally:
                if held:
                    connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": key})
                    connection.commit()

    def __enter__(self: D) -> D:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


    @contextmanager
    def _reading(self) -> Iterator[Session]:
        with translated(self.where), Session(self._engine) as session:
            yield session

    @contextmanager
    def _writing(self) -> Iterator[Session]:
        with (
            translated(self.where),
            Session(self._writer, expire_on_commit=False) as session,
            session.begin(),
        ):
            yield session




def now() -> datetime:
    return datetime.now(timezone.utc)


def record_of(cls: type[R], row: object, **named_otherwise: Any) -> R:
    """The record ``cls`` from a row's columns of the same names; the fields whose columns are
    named otherwise (or need converting) are given."""
    names = {f.name for f in dataclass_fields(cls)} - named_otherwise.keys()  # type: ignore[arg-type]
    return cls(**{name: getattr(row, name) for name in names}, **named_otherwise)


def added(session: Session, row: Repository | Environment | ProbeVersion | Run | BisectSession) -> int:
    session.add(row)
    session.flush()
    return row.id


def in_chunks(session: Session, values: Sequence[K], query_of: Callable[[Sequence[K]], Any]) -> dict[K, Any]:
    """The (key, value) rows of ``query_of`` over ``values``, a chunk at a time (``db.chunks``)."""
    found: dict[K, Any] = {}
    for chunk in chunked(values):
        found.update(session.execute(query_of(chunk)).all())
    return found


def commit_id_of(session: Session, repo_id: int, sha: str) -> int:
    found = session.scalar(select(Commit.id).where(Commit.repository_id == repo_id, Commit.sha == sha))
    if found is None:
        raise LookupError(f"commit {sha} of repository {repo_id} is not recorded; record_commits it first")
    return found


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
    elif parsed.get_backend_name() == "postgresql":
        _configure_postgresql(engine)
    return engine, where


def _where(url: URL) -> str:
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
        return str(url.database)
    return url.render_as_string(hide_password=True)


def _make_parent(url: URL, where: str) -> None:
    """Create the data directory, which regtrack owns, for a database in it; any other directory a
    SQLite URL names must exist already (a mistyped URL must not leave new directories behind)."""
    if url.database in (None, "", ":memory:"):
        return
    parent = Path(url.database).absolute().parent
    if parent.is_dir():
        return
    if parent != data_dir():
        raise UsageError(
            f"the directory {parent} of database {where} does not exist; "
            "create it, or set REGTRACK_DB_URL to a file in an existing directory"
        )
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(
            f"cannot create directory {parent} for database {where} ({exc.strerror}); "
            "set REGTRACK_HOME or REGTRACK_DB_URL to a writable location"
        ) from None


def _unwritable_directory(where: str) -> str | None:
    """Why the existing directory of the SQLite file ``where`` cannot be written to, or None (it can,
    or there is no such directory): SQLite writes beside the database, in WAL mode even to read it."""
    directory = Path(where).absolute().parent
    if not directory.is_dir():
        return None
    try:
        with tempfile.TemporaryFile(dir=directory):
            return None
    except OSError as exc:
        return exc.strerror or type(exc).__name__


def _unwritable_message(where: str, reason: str) -> str:
    return (
        f"database {where} cannot be opened: its directory {Path(where).absolute().parent} cannot be written "
        f"({reason}), and SQLite writes beside the database; make it writable, or set REGTRACK_HOME or "
        "REGTRACK_DB_URL to a writable place"
    )


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
        if "unable to open" in reason and (unwritable := _unwritable_directory(where)):
            raise UsageError(_unwritable_message(where, unwritable)) from None
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
        portable_limits(dbapi_connection)
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        cursor.execute("PRAGMA foreign_keys = ON")
        _switch_to_wal(cursor, busy_timeout_ms)
        # In WAL mode NORMAL loses no committed transaction when the process dies (a crash, a kill,
        # Ctrl-C), only on a power loss, and spares a sync per transaction: a cheap check's run is
        # several transactions (claim, store, release), each of which would otherwise wait on the disk.
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def on_begin(connection: Connection) -> None:
        write = connection.get_execution_options().get("regtrack_write", False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


WRITER_LOCK = 0x72656774
"""The PostgreSQL advisory lock key every writing transaction holds ("regt")."""


def _configure_postgresql(engine: Engine) -> None:
    """Writers one at a time, as on SQLite: a writing transaction's first statement waits for the
    advisory lock, which PostgreSQL releases when the transaction ends."""

    @event.listens_for(engine, "begin")
    def on_begin(connection: Connection) -> None:
        if connection.get_execution_options().get("regtrack_write", False):
            connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({WRITER_LOCK})")


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
    """Migrate to head; a database already at head is only read, without loading alembic (a third
    of a second of imports for a command that finds everything stored)."""
    head = head_revision()
    with engine.connect() as connection:
        if head is not None and _stored_revision(connection) == head:
            return
    _migrate(engine, where)


def _stored_revision(connection: Connection) -> str | None:
    """The one schema revision the database records (None: none, or several)."""
    if not inspect(connection).has_table("alembic_version"):
        return None
    rows = connection.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    return rows[0] if len(rows) == 1 else None


def _migrate(engine: Engine, where: str) -> None:
    from alembic import command
    from alembic.config import Config
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

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
def translated(where: str) -> Iterator[None]:
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
        if unwritable := _unwritable_directory(where):
            return _unwritable_message(where, unwritable)
        return f"database {where} cannot be written ({reason}); fix its permissions or set REGTRACK_DB_URL to a writable file"
    return f"database {where} cannot be used ({reason}); check it or set REGTRACK_DB_URL to another database"


