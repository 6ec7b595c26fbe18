"""Calling the regtrack CLI as a user in a directory would: the working directory is where a
``regtrack.toml`` is found, so the call moves there and back."""

from __future__ import annotations

import os
from pathlib import Path

from click.testing import CliRunner, Result

from tracker.cli.app import main


def regtrack(*args: str, cwd: Path) -> Result:
    old = Path.cwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, list(args), catch_exceptions=False)
    finally:
        os.chdir(old)
