"""Where regtrack keeps its database and caches: REGTRACK_HOME, else the XDG directories."""

from __future__ import annotations

import os
from pathlib import Path


def _xdg(variable: str, fallback: str) -> Path:
    value = os.environ.get(variable, "")
    if os.path.isabs(value):
        return Path(value) / "regtrack"
    return Path.home() / fallback / "regtrack"


def _home() -> Path | None:
    value = os.environ.get("REGTRACK_HOME", "")
    return Path(value).expanduser().absolute() if value else None


def data_dir() -> Path:
    home = _home()
    return home / "data" if home else _xdg("XDG_DATA_HOME", ".local/share")


def cache_dir() -> Path:
    home = _home()
    return home / "cache" if home else _xdg("XDG_CACHE_HOME", ".cache")


def default_db_url() -> str:
    return os.environ.get("REGTRACK_DB_URL") or f"sqlite:///{data_dir() / 'regtrack.db'}"
