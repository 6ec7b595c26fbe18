"""The HTML report of a long first-parent line, as ``regtrack report --html`` writes it: its size and
how long headless Chromium takes to open it, with a screenshot.

    python scripts/bench_report_page.py [--commits 15000] [--trees 300] [--out DIR]

Builds, in a temporary directory, a repository of ``--commits`` commits holding ``--trees`` target
trees, with 4 probes measured at the first commit of most trees and every other commit reusing its
tree's results, transitions and a revert / re-land pair (``tests/long_line.py``). Then it runs
``regtrack report --html`` in a subprocess and loads the page in headless Chromium (skipped without
a ``chromium`` binary).

Prints the page's size and that of each section, the report command's wall time, the time from
navigation to the load event, the timeline's rows, and where the page and its screenshot are.
Targets: under 2 MB, open in under 2 s. Exits 1 when the page misses one.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "scripts")]

from chromium import Browser, chromium_binary  # noqa: E402 - needs tests/ on sys.path
from long_line import long_line  # noqa: E402 - needs tests/ on sys.path
from report_screenshot import screenshot  # noqa: E402 - needs scripts/ on sys.path

SIZE_TARGET = 2_000_000
LOAD_TARGET_S = 2.0
MIN_TREES = 20


def load_seconds(page: Path) -> tuple[float, int] | None:
    """Chromium's time from navigation to the load event, and the timeline's rows."""
    binary = chromium_binary()
    if binary is None:
        return None
    # The helper moves Chromium's pipe ends to fds 3 and 4; held here so that a fresh process
    # does not create its pipes there.
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(2)]
    try:
        with tempfile.TemporaryDirectory(prefix="regtrack-bench-page-") as work:
            browser = Browser(binary, Path(work) / "profile", Path(work) / "chromium.log")
            try:
                loaded = browser.load(page)
                rows = loaded.evaluate("document.querySelectorAll('table.grid tbody tr').length")
                loaded.close()
                return loaded.load_seconds, rows
            finally:
                browser.close()
    finally:
        for fd in held:
            os.close(fd)


def section_sizes(page: str) -> list[tuple[str, int]]:
    """Bytes of each ``<section id=...>``, from its start to the next one's (the last to the end)."""
    starts = [(m.group(1), m.start()) for m in re.finditer(r'<section id="([^"]+)"', page)]
    ends = [start for _, start in starts[1:]] + [len(page)]
    return [(name, len(page[start:end].encode())) for (name, start), end in zip(starts, ends, strict=True)]


def bench(commits: int, trees: int, work: Path, out: Path) -> int:
    os.environ["REGTRACK_HOME"] = str(work / "home")
    os.environ.pop("REGTRACK_DB_URL", None)
    started = time.perf_counter()
    built = long_line(work / "repo", commits, trees)
    took = time.perf_counter() - started
    print(f"built   {len(built.line)} commits, {len(built.measured)} measured, in {took:.1f} s")
    page = out / "report.html"
    started = time.perf_counter()
    command = [sys.executable, "-m", "tracker.cli", "report", "--repo", str(built.repo), "--html", str(page)]
    subprocess.run(command, check=True, cwd=built.repo)
    print(f"report  {time.perf_counter() - started:8.3f} s   (regtrack report --html, wall time)")
    size = page.stat().st_size
    print(f"size    {size / 1e6:8.3f} MB  target < {SIZE_TARGET / 1e6} MB")
    for name, bytes_ in section_sizes(page.read_text(encoding="utf-8")):
        print(f"        {bytes_ / 1e6:8.3f} MB  #{name}")
    loaded = load_seconds(page)
    if loaded is None:
        print("load    no chromium")
        return 0 if size < SIZE_TARGET else 1
    print(f"load    {loaded[0]:8.3f} s   target < {LOAD_TARGET_S} s (navigation to the load event)")
    print(f"rows    {loaded[1]:8d}     in the timeline")
    screenshot(page, out / "report.png", 1400, 2400, chromium_binary() or "chromium")
    print(f"page    {page}\nshot    {out / 'report.png'}")
    return 0 if size < SIZE_TARGET and loaded[0] < LOAD_TARGET_S else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=15000, help="commits of the line (default 15000)")
    parser.add_argument("--trees", type=int, default=300, help="target trees along the line (default 300)")
    parser.add_argument("--out", type=Path, help="where the page and its screenshot go (default: a new directory)")
    args = parser.parse_args(argv)
    if not MIN_TREES <= args.trees <= args.commits:
        print(
            f"bench_report_page: --trees {args.trees} must be from {MIN_TREES} to --commits ({args.commits}); "
            "pass e.g. --trees 300",
            file=sys.stderr,
        )
        return 2
    out = (args.out or Path(tempfile.mkdtemp(prefix="regtrack-report-page-"))).resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="regtrack-bench-page-"))
    try:
        return bench(args.commits, args.trees, work, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
