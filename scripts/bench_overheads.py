"""regtrack's fixed costs: what a command costs when everything it needs is stored.

    python scripts/bench_overheads.py [--commits 10000] [--large 50000] [--runs 5] [--keep DIR]

Builds the demo history (``--commits`` first-parent commits), scans it once (set-up: every
distinct target tree is measured), then times, each the median of ``--runs`` runs of a fresh
``python -m tracker.cli`` process, interpreter start-up included:

* a bisect whose every step is stored (``target_verify_metadata`` from the commit that mends the
  untestable stretch to the parent of the bug's fix), target < 0.5 s, 0 executions, no session;
* a re-scan of the whole history, target < 2 s, 0 executions;
* ``--help``, ``history``, ``show HEAD``, ``regressions`` and ``report --html``, target < 0.5 s each;
* what each of these imported (``-X importtime``): torch and Alembic never (the store loads Alembic
  only to migrate), and the time its imports took, SQLAlchemy's share apart;
* worker processes started by all of the above (their log files), target 0.

Then, unless ``--large 0``, the same history at ``--large`` commits, whose whole range holds more
commits than SQLite binds in one statement (32,766): scanned, re-scanned and bisected across the
whole line, target: no error, 0 executions the second time.

Prints one table with each figure against its target; exits 1 when one is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Runs from a checkout, where regtrack need not be installed.
sys.path.insert(0, str(ROOT))

from tracker.demo.history import DemoManifest, build_demo_history  # noqa: E402

PROBE = "target_verify_metadata"
BUG = "target_verify_overwrite"
HEAVY = ("torch", "alembic")
IMPORT_LINE = re.compile(r"import time:\s+\d+ \|\s+(\d+) \|( +)(\S+)$")


@dataclass(frozen=True)
class Row:
    figure: str
    value: str
    target: str
    met: bool


class Bench:
    """One demo history and its regtrack home; every command runs as a user would run it."""

    def __init__(self, work: Path, commits: int) -> None:
        self.demo = work / f"demo-{commits}"
        self.home = work / f"home-{commits}"
        self.commits = commits
        started = time.perf_counter()
        self.manifest: DemoManifest = build_demo_history(self.demo, commits)
        print(f"demo history: {commits} commits, built in {time.perf_counter() - started:.1f} s", flush=True)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") and k != "REGTRACK_DB_URL"}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
        env["REGTRACK_HOME"] = str(self.home)
        return env

    def run(self, *args: str, importtime: bool = False) -> tuple[float, subprocess.CompletedProcess[str]]:
        flags = ["-X", "importtime"] if importtime else []
        command = [sys.executable, *flags, "-m", "tracker.cli", *args]
        started = time.perf_counter()
        done = subprocess.run(command, cwd=self.demo, env=self.env(), capture_output=True, text=True, check=False)
        return time.perf_counter() - started, done

    def median(self, runs: int, *args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
        """The median wall time of ``runs`` runs, and the last run's process."""
        walls, done = [], None
        for _ in range(runs):
            wall, done = self.run(*args)
            walls.append(wall)
        assert done is not None
        return statistics.median(walls), done

    def imported(self, *args: str) -> tuple[list[str], float, float]:
        """Which of ``HEAVY`` the command imported; the seconds its imports took, and SQLAlchemy's."""
        _, done = self.run(*args, importtime=True)
        heavy = [name for name in HEAVY if re.search(rf"\|\s+{name}$", done.stderr, re.MULTILINE)]
        return heavy, import_seconds(done.stderr), import_seconds(done.stderr, "sqlalchemy")

    def queries(self) -> list[tuple[str, ...]]:
        """The commands that answer from the store, running nothing; ``--help`` with them."""
        page = str(self.home / "report.html")
        return [("--help",), ("history",), ("show", "HEAD"), ("regressions",), ("report", "--html", page)]

    def workers_started(self) -> int:
        return len(list(self.home.rglob("worker-*.log")))

    def bisect_range(self) -> tuple[str, str]:
        """Good: the commit that mends the untestable stretch; bad: the first-parent parent of the fix."""
        return self.manifest.untestable.mended, f"{self.manifest.bugs[BUG].fixed}^1"


def report(done: subprocess.CompletedProcess[str]) -> dict:
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"bench_overheads: exit {done.returncode}: {tail}") from None


def fixed_costs(bench: Bench, runs: int) -> list[Row]:
    full = f"{bench.manifest.head}~{bench.commits - 1}..{bench.manifest.head}"
    started = time.perf_counter()
    first = report(bench.run("scan", full, "--json")[1])
    took = time.perf_counter() - started
    print(f"set-up scan: {first['executions']} executions, {first['reused']} reused, {took:.1f} s", flush=True)
    workers = bench.workers_started()
    good, bad = bench.bisect_range()
    bisect_args = ("bisect", "--good", good, "--bad", bad, "--probe", PROBE, "--json")
    rows = [stored_bisect_row(bench, runs, bisect_args), rescan_row(bench, runs, full)]
    for args in bench.queries():
        wall, done = bench.median(runs, *args)
        rows.append(Row(f"regtrack {args[0]}", f"{wall:.2f} s", "< 0.5 s", wall < 0.5 and done.returncode == 0))
    rows += [imports_row(bench, "bisect (stored)", bisect_args), imports_row(bench, "scan (stored)", ("scan", full))]
    rows += [imports_row(bench, f"regtrack {args[0]}", args) for args in bench.queries()]
    started_since = bench.workers_started() - workers
    rows.append(Row("workers started by the commands above", str(started_since), "0", started_since == 0))
    return rows


def stored_bisect_row(bench: Bench, runs: int, args: tuple[str, ...]) -> Row:
    wall, done = bench.median(runs, *args)
    bisected = report(done)
    executions, session = bisected["executions"], bisected["session"]
    good, bad = bench.bisect_range()
    line = ["git", "rev-list", "--first-parent", f"{good}..{bad}"]
    n = len(subprocess.run(line, cwd=bench.demo, capture_output=True, text=True, check=True).stdout.split())
    value = f"{wall:.2f} s, {executions} executions, session {session}"
    met = wall < 0.5 and executions == 0 and session is None
    return Row(f"bisect, every step stored ({n} commits)", value, "< 0.5 s, 0, none", met)


def rescan_row(bench: Bench, runs: int, full: str) -> Row:
    wall, done = bench.median(max(3, runs // 2), "scan", full, "--json")
    executions = report(done)["executions"]
    value = f"{wall:.2f} s, {executions} executions"
    return Row(f"re-scan of {bench.commits} stored commits", value, "< 2 s, 0", wall < 2 and executions == 0)


def imports_row(bench: Bench, label: str, args: tuple[str, ...]) -> Row:
    found, total_s, sqlalchemy_s = bench.imported(*args)
    value = f"{', '.join(found) or 'none'}; imports {total_s:.2f} s (sqlalchemy {sqlalchemy_s:.2f} s)"
    return Row(f"{label}: {' or '.join(HEAVY)} imported", value, "none", not found)


def import_seconds(importtime: str, package: str = "") -> float:
    """The seconds that ``-X importtime`` output gives the outermost imports of ``package`` (of
    anything, without one): each counted with what it imported."""
    total, counted_depth = 0, None
    for line in reversed(importtime.splitlines()):
        match = IMPORT_LINE.match(line)
        if match is None:
            continue
        cumulative, depth, name = int(match[1]), len(match[2]), match[3]
        if counted_depth is not None and depth > counted_depth:
            continue
        counted_depth = None
        if not package or name == package or name.startswith(f"{package}."):
            total += cumulative
            counted_depth = depth
    return total / 1e6


def large_range(bench: Bench) -> list[Row]:
    """The whole line of a history longer than one statement's parameter limit."""
    full = f"{bench.manifest.head}~{bench.commits - 1}..{bench.manifest.head}"
    started = time.perf_counter()
    first = report(bench.run("scan", full, "--json")[1])
    first_s = time.perf_counter() - started
    again_s, done = bench.run("scan", full, "--json")
    again = report(done)
    first_commit = bench.manifest.head + f"~{bench.commits - 1}"
    bisect_args = ("bisect", "--good", first_commit, "--bad", bench.bisect_range()[1], "--probe", PROBE, "--json")
    bisect_s, bisect_done = bench.run(*bisect_args)
    bisected = bisect_done.returncode in (0, 1) and report(bisect_done)["executions"] == 0
    scanned = f"{first_s:.1f} s ({first['executions']} executions), {again_s:.2f} s ({again['executions']})"
    rescanned = again["executions"] == 0
    return [
        Row(f"scan of {bench.commits} commits, then again", scanned, "no error, 0 executions again", rescanned),
        Row(
            f"bisect across the {bench.commits}-commit line, stored",
            f"{bisect_s:.2f} s, exit {bisect_done.returncode}",
            "no error, 0 executions",
            bisected,
        ),
    ]


def table(rows: list[Row]) -> str:
    header = ("figure", "measured", "target", "met")
    cells = [header, *((r.figure, r.value, r.target, "met" if r.met else "MISSED") for r in rows)]
    widths = [max(len(c[i]) for c in cells) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def bench(work: Path, commits: int, large: int, runs: int) -> int:
    rows = fixed_costs(Bench(work, commits), runs)
    if large:
        rows += large_range(Bench(work, large))
    print()
    print(table(rows))
    missed = [r for r in rows if not r.met]
    print(f"\n{len(rows) - len(missed)} of {len(rows)} targets met")
    return 1 if missed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Time regtrack's fixed costs against their targets.")
    parser.add_argument("--commits", type=int, default=10_000, help="first-parent commits of the demo history")
    parser.add_argument("--large", type=int, default=50_000, help="commits of the long history (0: skip it)")
    parser.add_argument("--runs", type=int, default=5, help="runs per timed command; the median is reported")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="work in DIR (missing or empty) and keep it")
    args = parser.parse_args(argv)
    if args.commits < 1000 or args.runs < 1 or args.large < 0:
        print("bench_overheads: --commits must be >= 1000, --runs >= 1, --large >= 0", file=sys.stderr)
        return 2
    if args.keep is not None:
        if args.keep.exists() and (not args.keep.is_dir() or any(args.keep.iterdir())):
            print(f"bench_overheads: {args.keep} exists and is not an empty directory; name a new one", file=sys.stderr)
            return 2
        args.keep.mkdir(parents=True, exist_ok=True)
        return bench(args.keep.resolve(), args.commits, args.large, args.runs)
    work = Path(tempfile.mkdtemp(prefix="regtrack-bench-overheads-"))
    try:
        return bench(work, args.commits, args.large, args.runs)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
