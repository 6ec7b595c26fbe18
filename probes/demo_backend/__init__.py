"""The built-in probes. :func:`load` imports their modules, and importing a module registers its
probe; ``NAMES`` lists them without importing anything, so checking a configuration's probe names
does not pay for torch. A probe module imports its torch-using helpers (``checks``, ``scenario``)
inside ``check``: a command that finds every result stored learns each probe's name, version,
code and cases without loading torch."""

from __future__ import annotations

import importlib

# Module and probe names alike, in registration order: the default probe order.
NAMES = ("target_verify_metadata", "target_verify_attention", "decode_graph_replay", "swa_page_table")


def load() -> None:
    for name in NAMES:
        importlib.import_module(f"{__name__}.{name}")
