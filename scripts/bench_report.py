"""Time the HTML report on the 1000-commit history of ``tests/test_report_html.py``: rendering it
(the median of ``--runs``, after one warm-up render that compiles the templates), its size, and
how long headless Chromium takes to load it (skipped without a ``chromium`` binary).

    python scripts/bench_report.py [--commits 1000] [--runs 5]

Targets: rendering under 5 s and loading under 20 s on the 2-core CPU machine, under 4 MB.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from chromium import Browser, chromium_binary  # noqa: E402 - needs tests/ on sys.path
from test_report_html import large_report  # noqa: E402 - needs tests/ on sys.path

from tracker.report.html import render_html  # noqa: E402 - after the sys.path insert

RENDER_TARGET_S = 5.0
LOAD_TARGET_S = 20.0
SIZE_TARGET = 4_000_000


def render_seconds(commits: int, runs: int) -> tuple[float, str]:
    """The median render time of a report of ``commits`` commits, and the page."""
    data = large_report(commits)
    page = render_html(data)
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        page = render_html(data)
        times.append(time.perf_counter() - started)
    return statistics.median(times), page


def load_seconds(page: str) -> float | None:
    """How long Chromium takes to load the page, from navigation to the load event."""
    binary = chromium_binary()
    if binary is None:
        return None
    # The helper moves Chromium's pipe ends to fds 3 and 4; in a fresh process the pipes would be
    # created there and closed by that move, so those two are held for the duration.
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(2)]
    try:
        with tempfile.TemporaryDirectory(prefix="regtrack-bench-report-") as work:
            path = Path(work) / "report.html"
            path.write_text(page, encoding="utf-8")
            browser = Browser(binary, Path(work) / "profile", Path(work) / "chromium.log")
            try:
                loaded = browser.load(path)
                loaded.close()
                return loaded.load_seconds
            finally:
                browser.close()
    finally:
        for fd in held:
            os.close(fd)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5, help="timed renders; the median is reported")
    args = parser.parse_args(argv)
    rendered, page = render_seconds(args.commits, args.runs)
    size = len(page.encode())
    loaded = load_seconds(page)
    print(f"render  {rendered:8.3f} s   target < {RENDER_TARGET_S} s")
    print(f"size    {size / 1e6:8.3f} MB  target < {SIZE_TARGET / 1e6} MB")
    print(f"load    {'no chromium' if loaded is None else f'{loaded:8.3f} s'}   target < {LOAD_TARGET_S} s")
    within = rendered < RENDER_TARGET_S and size < SIZE_TARGET and (loaded is None or loaded < LOAD_TARGET_S)
    return 0 if within else 1


if __name__ == "__main__":
    sys.exit(main())
