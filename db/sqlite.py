"""SQLite's side of the connection: the files regtrack creates or refuses before it connects, and
the settings of every connection (WAL, a busy timeout, foreign keys, writers that take the lock up
front)."""

from __future__ import annotations

import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, event
from sqlalchemy.engine import URL

from db.chunks import portable_limits
from db.paths import data_dir
from tracker.core.errors import UsageError


def make_parent(url: URL, where: str) -> None:
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


def unwritable_directory(where: str) -> str | None:
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


def unwritable_message(where: str, reason: str) -> str:
    return (
        f"database {where} cannot be opened: its directory {Path(where).absolute().parent} cannot be written "
        f"({reason}), and SQLite writes beside the database; make it writable, or set REGTRACK_HOME or "
        "REGTRACK_DB_URL to a writable place"
    )


def refuse_foreign_sqlite(url: URL, where: str) -> None:
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
        if "unable to open" in reason and (unwritable := unwritable_directory(where)):
            raise UsageError(unwritable_message(where, unwritable)) from None
        raise UsageError(
            f"database {where} cannot be read as SQLite ({reason}); restore it or set REGTRACK_DB_URL to another file"
        ) from None
    if tables and "alembic_version" not in tables:
        shown = ", ".join(sorted(tables)[:3])
        raise UsageError(
            f"database {where} is not a regtrack database (it holds tables {shown}); "
            "set REGTRACK_DB_URL to a regtrack database or a new file"
        )


def configure_sqlite(engine: Engine, busy_timeout_ms: int, read_only: bool) -> None:
    """WAL, a busy timeout, foreign keys, and transactions that SQLAlchemy (not sqlite3) begins. A
    read-only store leaves the journal mode as it finds it (WAL, where the store made the file)."""

    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection: Any, _record: object) -> None:
        dbapi_connection.isolation_level = None
        portable_limits(dbapi_connection)
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        cursor.execute("PRAGMA foreign_keys = ON")
        if not read_only:
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
