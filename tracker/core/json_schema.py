"""The version every JSON output of regtrack carries, as its ``schema`` key."""

from __future__ import annotations

from typing import Any

JSON_SCHEMA_VERSION = 1
"""Raised when a key of any JSON output changes meaning or goes away; new keys keep it."""


def versioned(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with the ``schema`` key first."""
    return {"schema": JSON_SCHEMA_VERSION, **data}
