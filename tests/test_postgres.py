"""The store on PostgreSQL: a throwaway server of the tests' own (``tests/postgres_server.py``), the
migrations run on it, a bisect stored and answered again from it, the track lock held as a
database advisory lock, and writers racing on the same rows (``scripts/load_test.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_in import regtrack
from demo_histories import DemoHistories
from load_runs import load_test
from postgres_server import Server
from sqlalchemy import create_engine, text

from db.models import SCHEMA_REVISION
from db.store import Store
from tracker.demo.history import DemoManifest
from tracker.demo.target import DEMO_TARGET
from tracker.track import track_lock

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@pytest.fixture
def database(postgres: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = postgres.new_database()
    monkeypatch.setenv("REGTRACK_DB_URL", url)
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    return url


@pytest.fixture(scope="module")
def demo(demo_histories: DemoHistories) -> tuple[Path, DemoManifest]:
    return demo_histories.shared(60)


def test_the_migrations_run_on_postgresql(database: str) -> None:
    Store.open(database).close()
    engine = create_engine(database)
    with engine.connect() as connection:
        assert connection.execute(text("SELECT version_num FROM alembic_version")).scalar() == SCHEMA_REVISION
        tables = set(connection.execute(text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")).scalars())
    engine.dispose()
    assert {"commits", "runs", "claims", "environments", "input_sets", "bisect_sessions"} <= tables


def bisect(repo: Path, good: str, bad: str) -> dict:
    result = regtrack(
        "bisect",
        "--repo",
        str(repo),
        "--good",
        good,
        "--bad",
        bad,
        "--probe",
        "target_verify_metadata",
        "--json",
        cwd=repo,
    )
    assert result.exit_code == 1, result.output
    return json.loads(result.stdout)


def test_a_bisect_is_stored_in_postgresql_and_answered_from_it_again(
    database: str, demo: tuple[Path, DemoManifest]
) -> None:
    repo, manifest = demo
    overwrite = manifest.bugs["target_verify_overwrite"]
    good, bad = manifest.untestable.mended, overwrite.fixed + "~1"
    first = bisect(repo, good, bad)
    again = bisect(repo, good, bad)
    assert first["culprit"] == again["culprit"] == overwrite.introduced
    assert first["executions"] > 0 and again["executions"] == 0
    history = regtrack("history", "--repo", str(repo), "--json", cwd=repo)
    assert history.exit_code == 0, history.output
    assert json.loads(history.stdout)["runs"]


def test_the_track_lock_is_a_database_advisory_lock(
    database: str, demo: tuple[Path, DemoManifest], tmp_path: Path
) -> None:
    repo, _ = demo
    with Store.open(database) as other_host:
        assert other_host.shared
        with track_lock(other_host, repo, DEMO_TARGET, wait=False):
            blocked = regtrack("track", "--repo", str(repo), "--out", str(tmp_path / "reports"), cwd=repo)
    assert blocked.exit_code == 2
    assert "another `regtrack track` is running" in blocked.stderr and "--wait" in blocked.stderr
    assert not (tmp_path / "home" / "data" / "locks").exists(), "a shared store needs no lock file"
    done = regtrack("track", "--repo", str(repo), "--out", str(tmp_path / "reports"), cwd=repo)
    assert done.exit_code in (0, 1), done.output


def test_racing_writers_store_every_run_once_on_postgresql(postgres: Server) -> None:
    [outcome] = load_test(postgres.new_database(), writers=4, runs=60)
    assert outcome["store"] == "postgresql"
    assert (outcome["runs_stored"], outcome["commits_stored"]) == (4 * 60, 15)
    assert outcome["errors"] == outcome["duplicate_commits"] == outcome["duplicate_environments"] == 0
