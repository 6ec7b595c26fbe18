"""Screenshot of an HTML report with headless Chromium (Debian's ``chromium`` package).

    python scripts/report_screenshot.py REPORT.html OUT.png [--width 1400] [--height 2400]

REPORT.html comes from ``regtrack report --html REPORT.html`` (e.g. after ``regtrack demo`` and
``regtrack scan --repo ~/.local/share/regtrack/demo-history``).

Chromium runs with a fresh profile and no network features, so the screenshot shows exactly what
the self-contained page renders offline.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
)


def screenshot(report: Path, out: Path, width: int, height: int, chromium: str, timeout: float = 120) -> None:
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="regtrack-chromium-") as profile:
        command = [
            chromium,
            *FLAGS,
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            f"--screenshot={out}",
            report.resolve().as_uri(),
        ]
        done = subprocess.run(
            command, check=False, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout
        )
    if done.returncode != 0 or not out.exists():
        raise SystemExit(f"chromium failed ({done.returncode}): {done.stderr.strip()[-2000:]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path, help="the HTML report")
    parser.add_argument("out", type=Path, help="the PNG to write")
    parser.add_argument("--width", type=int, default=1400, help="window width in CSS pixels (default 1400)")
    parser.add_argument("--height", type=int, default=2400, help="window height in CSS pixels (default 2400)")
    parser.add_argument(
        "--chromium", default=shutil.which("chromium") or "/usr/bin/chromium", help="the Chromium binary"
    )
    args = parser.parse_args(argv)
    if not args.report.is_file():
        parser.error(f"no such report: {args.report}")
    if not Path(args.chromium).exists() and shutil.which(args.chromium) is None:
        parser.error(f"no Chromium at {args.chromium} (apt-get install chromium)")
    screenshot(args.report, args.out, args.width, args.height, args.chromium)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
