"""The built-in probes, of the demo backend. :func:`load` imports their declarations, and importing
one registers its probe; ``NAMES`` lists them without importing anything. A declaration holds the
cases and names its check (``judges``), so looking a probe up never loads torch; the worker imports
the check when it runs a case."""

from __future__ import annotations

import importlib

# Module and probe names alike, in registration order: the default probe order.
NAMES = ("target_verify_metadata", "target_verify_attention", "decode_graph_replay", "swa_page_table")


def load() -> None:
    for name in NAMES:
        importlib.import_module(f"{__name__}.{name}")
