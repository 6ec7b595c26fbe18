"""SGLang-shaped histories of ``triton_backend.py``, written by this project.

Each revision holds the TRTLLM-shaped support tree (``sglang_shaped``: ``forward_batch_info``, the
base backend, a ``sglang/__init__.py`` that fails when run), this package's Triton backend in one
era with planted bugs switched on or off (``variant``), and the draft-decode kernel's module.
"""

from .history import build_triton_history, triton_tree, write_tree
from .source import backend_text
from .variant import BACKEND_PATH, ERAS, Bug, Variant

__all__ = [
    "BACKEND_PATH",
    "ERAS",
    "Bug",
    "Variant",
    "backend_text",
    "build_triton_history",
    "triton_tree",
    "write_tree",
]
