"""A throwaway PostgreSQL server for the tests: ``initdb`` and ``pg_ctl`` in a temporary directory,
listening on a Unix socket there only, run as the ``postgres`` user when the tests run as root
(PostgreSQL refuses to run as root). Debian's ``postgresql`` package provides the programs."""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

SERVER_USER = "postgres"
PORT = 5433


def programs() -> Path | None:
    """The directory holding initdb and pg_ctl, or None when PostgreSQL is not installed."""
    found = shutil.which("initdb")
    if found:
        return Path(os.path.realpath(found)).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(versions[-1]).parent if versions else None


@dataclass(frozen=True)
class Server:
    socket_dir: Path
    port: int

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://regtrack@/{database}?host={self.socket_dir}&port={self.port}"

    def new_database(self) -> str:
        """The URL of a new, empty database of this server."""
        import psycopg

        name = f"regtrack_{secrets.token_hex(4)}"
        with psycopg.connect(
            host=str(self.socket_dir), port=self.port, user="regtrack", dbname="postgres", autocommit=True
        ) as db:
            db.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


def missing() -> str | None:
    """Why no server can be started here (no driver, no server programs); None when one can."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install -e '.[postgres]')"
    return None if programs() is not None else "PostgreSQL is not installed (apt-get install postgresql)"


@contextmanager
def running_server() -> Iterator[Server]:
    bin_dir = programs()
    if bin_dir is None:
        raise RuntimeError("PostgreSQL is not installed; apt-get install postgresql (.ci/run does)")
    where = Path(tempfile.mkdtemp(prefix="regtrack-pg-", dir="/tmp"))
    as_user = _as_server_user(where)
    data, sockets = where / "data", where / "socket"
    sockets.mkdir()
    if as_user:
        shutil.chown(sockets, SERVER_USER, SERVER_USER)
    run = lambda *argv: subprocess.run([*as_user, *argv], check=True, capture_output=True, text=True)  # noqa: E731
    try:
        run(str(bin_dir / "initdb"), "-D", str(data), "-U", "regtrack", "--auth=trust", "-E", "UTF8", "--no-locale")
        options = f"-k {sockets} -p {PORT} -c listen_addresses='' -c fsync=off -c max_connections=200"
        run(str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(where / "server.log"), "-w", "start")
        try:
            yield Server(sockets, PORT)
        finally:
            run(str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
    finally:
        shutil.rmtree(where, ignore_errors=True)


def _as_server_user(where: Path) -> list[str]:
    """The prefix that runs a program as the server's user: none unless we are root."""
    if os.geteuid() != 0:
        return []
    pwd.getpwnam(SERVER_USER)
    where.chmod(0o755)
    shutil.chown(where, SERVER_USER, SERVER_USER)
    return ["runuser", "-u", SERVER_USER, "--"]
