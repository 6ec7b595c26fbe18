"""Ready-made target configurations for known repositories, written by ``regtrack init NAME``."""

from __future__ import annotations

from pathlib import Path

from tracker.core.errors import UsageError

CONFIG_NAME = "regtrack.toml"

SGLANG_PROBES = (
    "sglang_target_verify_metadata",
    "sglang_decode_graph_replay",
    "sglang_swa_page_table",
    "sglang_target_verify_attention",
)

_SGLANG = f"""\
# regtrack's SGLang target: the TRTLLM MHA attention backend's CUDA-graph metadata, probed by
# running each revision's own python/sglang (GPU libraries stubbed on a CPU machine; a stub
# reached while a probe runs makes the revision untestable, never good or bad).
[targets.sglang]
repo = "."
paths = ["python/sglang"]
branch = "main"
import_roots = ["python"]
timeout = 600
probes = {list(SGLANG_PROBES)!r}
"""

TEMPLATES = {"sglang": _SGLANG}


def template(name: str) -> str:
    try:
        return TEMPLATES[name]
    except KeyError:
        raise UsageError(f"no template called {name!r}; known templates: {', '.join(TEMPLATES)}") from None


def write_template(name: str, directory: Path) -> Path:
    """Write the template ``name`` as ``regtrack.toml`` in ``directory``, never over an existing one."""
    text = template(name)
    if not directory.is_dir():
        raise UsageError(f"{directory} is not a directory; give the repository's root")
    config = directory / CONFIG_NAME
    if config.exists():
        raise UsageError(f"{config} exists; remove it or merge [targets.{name}] from `regtrack init {name} --print` by hand")
    config.write_text(text)
    return config
