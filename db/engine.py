"""The database connection: URLs, SQLite's settings (``db.sqlite``), PostgreSQL's, migrations, and
the errors a user can mend turned into one line.

Every store method runs in its own transaction, and writers take one at a time: on SQLite by
taking the lock up front (``BEGIN IMMEDIATE``), so that a busy database waits, then fails whole,
never half-written; on PostgreSQL by taking a transaction-level advisory lock as their first
statement. Each writer therefore sees every write committed before it, and the store's
look-up-then-insert methods (a commit, a tree, an environment) need no retry loop on either.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import fields as dataclass_fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, Select, create_engine, event, inspect, select, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DatabaseError, IntegrityError
from sqlalchemy.orm import Session

from db.chunks import chunked
from db.errors import NotStored
from db.models import SCHEMA_REVISION, BisectSession, Commit, Environment, ProbeVersion, Repository, Run
from db.paths import default_db_url
from db.sqlite import configure_sqlite, make_parent, refuse_foreign_sqlite, unwritable_directory, unwritable_message
from tracker.core.errors import UsageError

D = TypeVar("D", bound="Database")
Keyed = Repository | Environment | ProbeVersion | Run | BisectSession
"""A row whose id the store hands out."""
R = TypeVar("R")
K = TypeVar("K")


class Database:
    """An open database at the newest schema. ``read_only``: nothing is migrated or written, for a
    command that may find everything it needs stored; whatever needs a write raises ``NotStored``."""

    def __init__(self, engine: Engine, where: str, read_only: bool = False) -> None:
        self._engine = engine
        self._writer = engine.execution_options(regtrack_write=True)
        self.where = where
        self.read_only = read_only

    @classmethod
    def open(cls: type[D], url: str | None = None, *, busy_timeout_ms: int = 5000, read_only: bool = False) -> D:
        """The database at ``url``, migrated to the newest schema; read-only, ``NotStored`` unless it
        is an existing database at that schema already."""
        engine, where = _connect(url or default_db_url(), busy_timeout_ms, read_only)
        try:
            with translated(where):
                if read_only:
                    _require_current(engine, where)
                else:
                    _upgrade(engine, where)
        except BaseException:
            engine.dispose()
            raise
        return cls(engine, where, read_only)

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
        if self.read_only:
            raise NotStored(f"database {self.where} is open read-only")
        with (
            translated(self.where),
            Session(self._writer, expire_on_commit=False) as session,
            session.begin(),
        ):
            yield session

    def _id_or_added(self, query: Select[tuple[int]], row: Callable[[], Keyed]) -> int:
        """The id ``query`` finds, else that of ``row()`` stored. Looked up before the write lock is
        taken, so that finding a row waits for no writer and a read-only store answers it."""
        with self._reading() as session:
            found = session.scalar(query)
        if found is not None:
            return found
        with self._writing() as session:
            found = session.scalar(query)
            return found if found is not None else added(session, row())


def now() -> datetime:
    return datetime.now(UTC)


def record_of(cls: type[R], row: object, **named_otherwise: Any) -> R:
    """The record ``cls`` from a row's columns of the same names; the fields whose columns are
    named otherwise (or need converting) are given."""
    names = {f.name for f in dataclass_fields(cls)} - named_otherwise.keys()  # type: ignore[arg-type]
    return cls(**{name: getattr(row, name) for name in names}, **named_otherwise)


def added(session: Session, row: Keyed) -> int:
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


def _connect(url: str, busy_timeout_ms: int, read_only: bool = False) -> tuple[Engine, str]:
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise UsageError(f"invalid database URL {url!r}; use e.g. sqlite:////abs/path/regtrack.db") from None
    where = _where(parsed)
    if parsed.get_backend_name() == "sqlite":
        if read_only and (parsed.database in (None, "", ":memory:") or not Path(parsed.database).is_file()):
            raise NotStored(f"no database file at {where}")
        make_parent(parsed, where)
        refuse_foreign_sqlite(parsed, where)
    try:
        engine = create_engine(parsed)
    except (ArgumentError, ImportError) as exc:
        raise UsageError(f"cannot use database {where} ({exc}); install its driver or fix REGTRACK_DB_URL") from None
    if parsed.get_backend_name() == "sqlite":
        configure_sqlite(engine, busy_timeout_ms, read_only)
    elif parsed.get_backend_name() == "postgresql":
        _configure_postgresql(engine)
    return engine, where


def _where(url: URL) -> str:
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
        return str(url.database)
    return url.render_as_string(hide_password=True)


WRITER_LOCK = 0x72656774
"""The PostgreSQL advisory lock key every writing transaction holds ("regt")."""


def _configure_postgresql(engine: Engine) -> None:
    """Writers one at a time, as on SQLite: a writing transaction's first statement waits for the
    advisory lock, which PostgreSQL releases when the transaction ends."""

    @event.listens_for(engine, "begin")
    def on_begin(connection: Connection) -> None:
        if connection.get_execution_options().get("regtrack_write", False):
            connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({WRITER_LOCK})")


def _upgrade(engine: Engine, where: str) -> None:
    """Migrate to head. A database at the revision the models declare is only read: Alembic, which
    a command that finds everything stored has no use for, is loaded for a database behind it."""
    if not _at_models_revision(engine):
        _migrate(engine, where)


def _require_current(engine: Engine, where: str) -> None:
    if not _at_models_revision(engine):
        raise NotStored(f"database {where} is not at schema revision {SCHEMA_REVISION}")


def _at_models_revision(engine: Engine) -> bool:
    with engine.connect() as connection:
        return _stored_revision(connection) == SCHEMA_REVISION


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
        return (
            f"database {where} is damaged ({reason}); restore it from a backup or set REGTRACK_DB_URL to another file"
        )
    if "locked" in reason:
        return (
            f"database {where} is locked by another process; "
            "wait for it to finish or set REGTRACK_DB_URL to another file"
        )
    if "unable to open" in reason or "readonly" in reason:
        if unwritable := unwritable_directory(where):
            return unwritable_message(where, unwritable)
        return (
            f"database {where} cannot be written ({reason}); "
            "fix its permissions or set REGTRACK_DB_URL to a writable file"
        )
    return f"database {where} cannot be used ({reason}); check it or set REGTRACK_DB_URL to another database"
