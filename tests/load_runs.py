"""``scripts/load_test.py`` run as a user runs it, for the store tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "load_test.py"


def load_test(*urls: str, writers: int, runs: int) -> list[dict]:
    """One JSON object per store, after W writers recorded R runs each into it."""
    options = [option for url in urls for option in ("--url", url)]
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--writers", str(writers), "--runs", str(runs), *options, "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]
