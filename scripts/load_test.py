"""W writer processes recording R runs each into one store, racing on the same rows.

    python scripts/load_test.py [--writers 8] [--runs 500] [--url URL ...] [--json]

Each writer opens the store itself and, for every run, records its commit (drawn from a pool the
writers share, so several record the same commit at once), the commit's target tree, its
environment (one of a few, shared) and the probe version (one, shared), then the run: what a
scheduled job on another host does. Afterwards the rows are counted. Without ``--url`` the store is
a new SQLite file; a PostgreSQL URL (``postgresql+psycopg://...``) should name an empty database.

Prints, per store: rows expected and stored, duplicate commit, tree and environment rows,
errors, and runs per second. Target: 8 writers x 500 runs = exactly 4,000 runs stored, no
duplicate, no error, on SQLite and on PostgreSQL. Exits 1 when a store misses it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlalchemy import create_engine, func, select  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402

from db.models import Commit, Environment, Run, TargetTree  # noqa: E402
from db.store import Store  # noqa: E402
from tracker.core.records import CommitInfo, EnvironmentInfo, RunRecord  # noqa: E402
from tracker.core.verdicts import Outcome  # noqa: E402

REPOSITORY = Path("/load-test/repository")
PATHS_KEY = "load-test"
STACKS = ("2.11.0", "2.12.0", "2.13.0")


@dataclass(frozen=True)
class Outcomes:
    store: str
    writers: int
    runs_expected: int
    runs_stored: int
    commits_expected: int
    commits_stored: int
    duplicate_commits: int
    duplicate_trees: int
    duplicate_environments: int
    errors: int
    seconds: float

    @property
    def runs_per_second(self) -> float:
        return self.runs_stored / self.seconds if self.seconds else 0.0

    @property
    def met(self) -> bool:
        return (
            self.runs_stored == self.runs_expected
            and self.commits_stored == self.commits_expected
            and not (self.duplicate_commits or self.duplicate_trees or self.duplicate_environments or self.errors)
        )


def sha_of(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def pool_size(runs: int) -> int:
    """Commits shared by the writers: each is recorded by several of them."""
    return max(1, runs // 4)


def writer(
    url: str, index: int, runs: int, start: multiprocessing.synchronize.Event, errors: multiprocessing.Queue
) -> None:  # type: ignore[type-arg]
    start.wait()
    try:
        with Store.open(url, busy_timeout_ms=60_000) as store:
            repo_id = store.repository(REPOSITORY)
            probe_id = store.probe_version("load_test", 1, "0" * 16)
            for number in range(runs):
                commit = (number + index) % pool_size(runs)
                sha = sha_of(f"commit {commit}")
                info = CommitInfo(
                    sha, (sha_of(f"commit {commit - 1}"),), f"commit {commit}", "load test", datetime.now(UTC)
                )
                store.record_commits(repo_id, [info])
                tree = sha_of(f"tree {commit}")
                store.record_trees(repo_id, PATHS_KEY, {sha: tree})
                environment_id = store.environment(
                    EnvironmentInfo("cpu", torch=STACKS[number % len(STACKS)], python="3.11")
                )
                store.add_run(
                    RunRecord(
                        repo_id,
                        sha,
                        tree,
                        environment_id,
                        probe_id,
                        f"writer {index} run {number}",
                        "load",
                        "float32",
                        Outcome.PASS,
                        {},
                        None,
                        "",
                        0.0,
                        datetime.now(UTC),
                        1,
                        number,
                        "load-test",
                    )
                )
    except BaseException:
        errors.put(f"writer {index}: {traceback.format_exc(limit=3)}")


def load(url: str, writers: int, runs: int) -> Outcomes:
    Store.open(url).close()  # migrate once, before the race
    context = multiprocessing.get_context("spawn")
    start, errors = context.Event(), context.Queue()
    processes = [context.Process(target=writer, args=(url, index, runs, start, errors)) for index in range(writers)]
    for process in processes:
        process.start()
    time.sleep(1.0)  # let every writer import and wait at the start line
    started = time.perf_counter()
    start.set()
    for process in processes:
        process.join()
    seconds = time.perf_counter() - started
    failures = []
    while not errors.empty():
        failures.append(errors.get())
    for failure in failures:
        print(failure, file=sys.stderr)
    failed = sum(process.exitcode != 0 for process in processes)
    return count(url, writers, runs, len(failures) + failed, seconds)


def count(url: str, writers: int, runs: int, errors: int, seconds: float) -> Outcomes:
    engine = create_engine(url)
    try:
        with Session(engine) as session:
            return Outcomes(
                store=engine.dialect.name,
                writers=writers,
                runs_expected=writers * runs,
                runs_stored=rows(session, Run),
                commits_expected=pool_size(runs),
                commits_stored=rows(session, Commit),
                duplicate_commits=duplicates(session, Commit.repository_id, Commit.sha),
                duplicate_trees=duplicates(session, TargetTree.commit_id, TargetTree.paths_key),
                duplicate_environments=duplicates(session, Environment.fingerprint),
                errors=errors,
                seconds=seconds,
            )
    finally:
        engine.dispose()


def rows(session: Session, table: type[Any]) -> int:
    return int(session.scalar(select(func.count()).select_from(table)) or 0)


def duplicates(session: Session, *key: Any) -> int:
    """Values of ``key`` stored more than once."""
    grouped = select(func.count()).select_from(key[0].table).group_by(*key).having(func.count() > 1).subquery()
    return int(session.scalar(select(func.count()).select_from(grouped)) or 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--runs", type=int, default=500, help="runs each writer records")
    parser.add_argument("--url", action="append", help="store to load (repeatable; default: a new SQLite file)")
    parser.add_argument("--json", action="store_true", help="print one JSON object per store")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="regtrack-load-") as scratch:
        urls = args.url or [f"sqlite:///{Path(scratch) / 'load.db'}"]
        results = [load(url, args.writers, args.runs) for url in urls]
    for r in results:
        if args.json:
            print(json.dumps({**asdict(r), "runs_per_second": r.runs_per_second, "met": r.met}))
        else:
            print(
                f"{r.store}: {r.writers} writers, runs expected {r.runs_expected}, stored {r.runs_stored}; commits "
                f"{r.commits_stored}/{r.commits_expected}; duplicates: commits {r.duplicate_commits}, trees "
                f"{r.duplicate_trees}, environments {r.duplicate_environments}; errors {r.errors}; "
                f"{r.runs_per_second:.0f} runs/s ({r.seconds:.1f} s) -> {'met' if r.met else 'MISSED'}"
            )
    return 0 if all(r.met for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
