"""SGLang-shaped histories of ``flashinfer_backend.py``, written by this project.

Each revision holds the TRTLLM-shaped support tree (``sglang_shaped``: ``forward_batch_info``, the
base backend, a ``sglang/__init__.py`` that fails when run), the speculative modules the backend
reads (``spec``), and this package's FlashInfer backend in one era, with planted bugs switched on
or off (``variant``).
"""

from .history import build_flashinfer_history, flashinfer_tree, write_tree
from .source import backend_text
from .variant import BACKEND_PATH, ERAS, Bug, Variant

__all__ = [
    "BACKEND_PATH",
    "ERAS",
    "Bug",
    "Variant",
    "backend_text",
    "build_flashinfer_history",
    "flashinfer_tree",
    "write_tree",
]
