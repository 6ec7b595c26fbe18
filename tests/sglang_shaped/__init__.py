"""SGLang-shaped git repositories for tests: CI cannot fetch SGLang, so its shape is built here.

Each revision holds ``python/sglang/srt/layers/attention/trtllm_mha_backend.py`` in one era of
the real file's history (see ``variant``), written by this project: same module paths, class,
method names, signatures and attributes, tiny bodies of real torch code. Around it are the
sglang modules it imports (shaped like the real ones, with their GPU-library imports: triton,
flashinfer, sgl_kernel), a ``sglang/__init__.py`` that fails when executed, and files no probe
reads (docs, other backends, tests).

    from sglang_shaped import build_sglang_shaped_history
    manifest = build_sglang_shaped_history(tmp_path / "sglang", era="C1")
    manifest.introduced, manifest.fixed, manifest.reverted, manifest.relanded
"""

from .history import Expectation, ShapedManifest, expectation
from .stories import CROSS_ERA, build_cross_era_history, build_sglang_shaped_history
from .tree import Filler, backend_source, sglang_tree
from .variant import (
    BACKEND_PATH,
    ERAS,
    FORWARD_BATCH_PATH,
    IMPORT_ROOT,
    OVERWRITE,
    Variant,
)

__all__ = [
    "BACKEND_PATH",
    "CROSS_ERA",
    "ERAS",
    "Expectation",
    "FORWARD_BATCH_PATH",
    "Filler",
    "IMPORT_ROOT",
    "OVERWRITE",
    "ShapedManifest",
    "Variant",
    "backend_source",
    "build_cross_era_history",
    "build_sglang_shaped_history",
    "expectation",
    "sglang_tree",
]
