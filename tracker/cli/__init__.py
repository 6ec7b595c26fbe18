"""The ``regtrack`` command line: ``app`` holds the group, which loads the module of the command
asked for (``probing``, ``queries``, ``maintenance``)."""

from tracker.execution.environment import quiet_torch_import

quiet_torch_import()  # the probes the parent loads may import torch

from tracker.cli.app import main  # noqa: E402

__all__ = ["main"]
