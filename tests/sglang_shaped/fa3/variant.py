"""One revision of the SGLang-shaped ``flashattention_backend.py``: its era and planted bugs.

The eras follow the real file's CUDA-graph API (``probes.sglang.backends.fa3``):

- ``F0`` capture/replay, decode and target verify only (no multi-step draft backend, no draft
  extend graph);
- ``F1`` capture/replay with draft decode and draft extend, torch metadata copies sized by the
  host ``seq_lens_cpu``;
- ``F4`` ``init_forward_metadata_out_graph(forward_batch, in_capture)`` binding the buffers and
  running ``_apply_cuda_graph_metadata``, copies sized by the static ``max_num_pages``.

``F1`` and ``F4`` serve topk > 1 draft decode and target verify with the cascade of ``cascade``.

Each planted bug breaks one mode's graph metadata (or, for the T != N one, its decoupled
target verify) and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

BACKEND_PATH = "python/sglang/srt/layers/attention/flashattention_backend.py"
ERAS = ("F0", "F1", "F4")


class Bug(Enum):
    """A planted bug; its value: the probe mode it must fail, and where it sits."""

    DECODE_CAPTURE = ("decode", "capture")
    """Capture binds ``cu_seqlens_q[:bs]``, one entry short: a full batch's last request has no rows."""
    DECODE_REPLAY = ("decode", "replay")
    """Replay copies ``seq_len // page`` pages, dropping a request's last partial page."""
    DRAFT_DECODE_CAPTURE = ("draft_decode", "capture")
    """Capture bakes the 0-based step id as ``max_seq_len_q``: at step 0 the kernel computes no row."""
    DRAFT_DECODE_REPLAY = ("draft_decode", "replay")
    """Replay adds the step id, not step + 1, to the KV lengths."""
    VERIFY_CAPTURE = ("target_verify", "capture")
    """Capture bakes ``max_seq_len_q = 1``: the kernel computes one query row per request."""
    VERIFY_REPLAY = ("target_verify", "replay")
    """Replay writes ``seq_lens + N - 1`` as the KV lengths."""
    VERIFY_T_NE_N = ("target_verify", "T != N")
    """Decoupled target verify: replay writes ``seq_lens + N``, not ``+ T``."""
    DRAFT_DECODE_TOPK_STRIDE = ("draft_decode", "topk > 1 stride")
    """The expand page table reads each branch's draft slots with the stride of a step-major
    ``out_cache_loc`` (topk apart), not the branch-major one it is (consecutive)."""
    VERIFY_TOPK_STRIDE = ("target_verify", "topk > 1 stride")
    """The tree-mask rows are stepped by ``seq_len``, not ``seq_len + N``: every draft token but
    the first reads another's row."""
    DRAFT_EXTEND_CAPTURE = ("draft_extend", "capture")
    """Capture bakes ``max_seq_len_q = 1`` instead of the tokens per request."""
    DRAFT_EXTEND_REPLAY = ("draft_extend", "replay")
    """Replay writes ``seq_lens + extend_seq_lens`` as the KV lengths."""

    @property
    def mode(self) -> str:
        return self.value[0]


@dataclass(frozen=True)
class Variant:
    era: str
    bugs: frozenset[Bug] = field(default_factory=frozenset)
    decoupled: bool = False
    """Target verify takes T from the batch (``spec_info.num_tokens_per_req``), not N."""

    def __post_init__(self) -> None:
        if self.era not in ERAS:
            raise ValueError(f"unknown era {self.era!r}; eras: {', '.join(ERAS)}")

    def has(self, bug: Bug) -> bool:
        return bug in self.bugs
