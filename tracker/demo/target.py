"""The demo history's own target: a ``regtrack.toml`` beside its work tree, kept out of git.

The demo's paths and built-in probes apply to the demo history alone; any other repository
declares its own target (``regtrack init``) or passes ``--command``. The file is untracked and
listed in the repository's ``.git/info/exclude``, so the history's commits and a clean
``git status`` are as they were."""

from __future__ import annotations

from pathlib import Path

from probes.demo_backend import NAMES
from tracker.targets.templates import CONFIG_NAME

DEMO_TARGET = "demo"

_CONFIG = f"""\
# The demo history's target, written by `regtrack demo`: the demo attention backend under
# backend/, judged by regtrack's built-in probes.
[targets.{DEMO_TARGET}]
repo = "."
paths = ["backend"]
branch = "main"
probes = {list(NAMES)!r}
"""


def write_demo_config(repo: Path) -> Path:
    """Write the demo's ``regtrack.toml`` into ``repo`` (over an older one) and keep git from seeing it."""
    config = repo / CONFIG_NAME
    config.write_text(_CONFIG)
    exclude = repo / ".git" / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    listed = exclude.read_text().splitlines() if exclude.is_file() else []
    if f"/{CONFIG_NAME}" not in listed:
        with exclude.open("a") as file:
            file.write(f"/{CONFIG_NAME}\n")
    return config
