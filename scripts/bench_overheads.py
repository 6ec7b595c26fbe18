"""regtrack's fixed costs: what a command costs when everything it needs is stored.

    python scripts/bench_overheads.py [--commits 10000] [--large 50000] [--runs 5] [--keep DIR]

Builds the demo history (``--commits`` first-parent commits), scans it once (set-up: every
distinct target tree is measured), then times, each the median of ``--runs`` runs of a fresh
``python -m tracker.cli`` process, interpreter start-up included:

* a bisect whose every step is stored (``target_verify_metadata`` from the commit that mends the
  untestable stretch to the parent of the bug's fix), target < 0.5 s, 0 executions, no session;
* a re-scan of the whole history, target < 2 s, 0 executions;
* ``--help``, ``history``, ``show HEAD`` and ``regressions``, target < 0.3 s each;
* what each of these imported (``-X importtime``): torch and alembic never, SQLAlchemy not for a
  bisect or a query answered from the store;
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
HEAVY = ("torch", "alembic", "sqlalchemy")


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

    def imported(self, *args: str) -> list[str]:
        """Which of ``HEAVY`` the command imported."""
        _, done = self.run(*args, importtime=True)
        return [name for name in HEAVY if re.search(rf"\|\s+{name}$", done.stderr, re.MULTILINE)]

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
    print(f"set-up scan: {first['executions']} executions, {first['reused']} reused, {time.perf_counter() - started:.1f} s", flush=True)
    workers = bench.workers_started()
    good, bad = bench.bisect_range()
    bisect_args = ("bisect", "--good", good, "--bad", bad, "--probe", PROBE, "--json")
    bisect_s, bisect_done = bench.median(runs, *bisect_args)
    bisected = report(bisect_done)
    scan_s, scan_done = bench.median(max(3, runs // 2), "scan", full, "--json")
    rescanned = report(scan_done)
    n = len(subprocess.run(["git", "rev-list", "--first-parent", f"{good}..{bad}"], cwd=bench.demo, capture_output=True, text=True, check=True).stdout.split())
    rows = [
        Row(f"bisect, every step stored ({n} commits)", f"{bisect_s:.2f} s, {bisected['executions']} executions, session {bisected['session']}",
            "< 0.5 s, 0, none", bisect_s < 0.5 and bisected["executions"] == 0 and bisected["session"] is None),
        Row(f"re-scan of {bench.commits} stored commits", f"{scan_s:.2f} s, {rescanned['executions']} executions",
            "< 2 s, 0", scan_s < 2 and rescanned["executions"] == 0),
    ]  # fmt: skip
    for args in (("--help",), ("history",), ("show", "HEAD"), ("regressions",)):
        wall, done = bench.median(runs, *args)
        rows.append(Row(f"regtrack {' '.join(args)}", f"{wall:.2f} s", "< 0.3 s", wall < 0.3 and done.returncode == 0))
    rows += [imports_row(bench, "bisect (stored)", bisect_args, ()), imports_row(bench, "scan (stored)", ("scan", full), ("sqlalchemy",))]
    rows += [imports_row(bench, f"regtrack {' '.join(args)}", args, ()) for args in (("--help",), ("history",), ("show", "HEAD"), ("regressions",))]
    started_since = bench.workers_started() - workers
    rows.append(Row("workers started by the commands above", str(started_since), "0", started_since == 0))
    return rows


def imports_row(bench: Bench, label: str, args: tuple[str, ...], allowed: tuple[str, ...]) -> Row:
    found = bench.imported(*args)
    unwanted = [name for name in found if name not in allowed]
    allowed_text = f"only {', '.join(allowed)}" if allowed else "none"
    return Row(f"{label}: torch, alembic, sqlalchemy imported", ", ".join(found) or "none", allowed_text, not unwanted)


def large_range(bench: Bench) -> list[Row]:
    """The whole line of a history longer than one statement's parameter limit."""
    full = f"{bench.manifest.head}~{bench.commits - 1}..{bench.manifest.head}"
    started = time.perf_counter()
    first = report(bench.run("scan", full, "--json")[1])
    first_s = time.perf_counter() - started
    again_s, done = bench.run("scan", full, "--json")
    again = report(done)
    first_commit = bench.manifest.head + f"~{bench.commits - 1}"
    bisect_s, bisect_done = bench.run("bisect", "--good", first_commit, "--bad", bench.bisect_range()[1], "--probe", PROBE, "--json")
    bisected = bisect_done.returncode in (0, 1) and report(bisect_done)["executions"] == 0
    return [
        Row(f"scan of {bench.commits} commits, then again", f"{first_s:.1f} s ({first['executions']} executions), {again_s:.2f} s ({again['executions']})",
            "no error, 0 executions again", again["executions"] == 0),
        Row(f"bisect across the {bench.commits}-commit line, stored", f"{bisect_s:.2f} s, exit {bisect_done.returncode}", "no error, 0 executions", bisected),
    ]  # fmt: skip


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
