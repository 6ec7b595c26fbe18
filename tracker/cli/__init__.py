"""The ``regtrack`` command line: ``app`` holds the group, the other modules its commands."""

from tracker.cli import maintenance, probing, queries
from tracker.cli.app import main

__all__ = ["main", "maintenance", "probing", "queries"]
