"""Writers racing on the same rows of a SQLite store (``scripts/load_test.py`` at a small size; the
PostgreSQL run is in ``test_postgres``): every run stored once, no duplicate row, no error."""

from __future__ import annotations

from pathlib import Path

from load_runs import load_test


def test_racing_writers_store_every_run_once_on_sqlite(tmp_path: Path) -> None:
    [outcome] = load_test(f"sqlite:///{tmp_path / 'load.db'}", writers=4, runs=60)
    assert outcome["store"] == "sqlite"
    assert (outcome["runs_stored"], outcome["commits_stored"]) == (4 * 60, 15)
    assert (
        outcome["errors"]
        == outcome["duplicate_commits"]
        == outcome["duplicate_trees"]
        == outcome["duplicate_environments"]
        == 0
    )
    assert outcome["met"]
