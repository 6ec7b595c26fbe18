"""The ``regtrack`` command line."""

from tracker.cli.app import main

__all__ = ["main"]
