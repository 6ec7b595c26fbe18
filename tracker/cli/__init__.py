"""The ``regtrack`` command line: ``app`` holds the group, the other modules its commands."""

from tracker.execution.environment import quiet_torch_import

quiet_torch_import()  # the probes the parent loads may import torch

from tracker.cli import maintenance, probing, queries  # noqa: E402
from tracker.cli.app import main  # noqa: E402

__all__ = ["main", "maintenance", "probing", "queries"]
