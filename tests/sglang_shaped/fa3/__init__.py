"""SGLang-shaped histories of ``flashattention_backend.py`` (FA3), written by this project.

Each revision holds the TRTLLM-shaped support tree (``sglang_shaped``: ``forward_batch_info``, the
base backend, a ``sglang/__init__.py`` that fails when run) and this package's FA3 backend in one
era, with planted bugs switched on or off (``variant``).
"""

from .history import build_fa3_history, fa3_tree
from .source import backend_text
from .variant import BACKEND_PATH, ERAS, Bug, Variant

__all__ = ["BACKEND_PATH", "ERAS", "Bug", "Variant", "backend_text", "build_fa3_history", "fa3_tree"]
