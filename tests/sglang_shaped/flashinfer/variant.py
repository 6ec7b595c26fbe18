"""One revision of the SGLang-shaped ``flashinfer_backend.py``: its era and planted bugs.

The eras follow the real file's CUDA-graph API (``probes.sglang.backends.flashinfer``):

- ``A`` ``init_forward_metadata_capture_cuda_graph`` / ``..._replay_cuda_graph``, wrappers made
  inline; decode, target verify and the multi-step draft backend; no draft-extend v2 graph;
- ``B`` ``init_forward_metadata_out_graph(forward_batch, in_capture)``, wrappers made by
  ``_prepare_cuda_graph_metadata``, and a draft-extend v2 graph.

Each planted bug breaks one mode's graph metadata (the T != N one: target verify with T != N
only; the topk one: draft decode with topk > 1 only) and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

BACKEND_PATH = "python/sglang/srt/layers/attention/flashinfer_backend.py"
ERAS = ("A", "B")


class Bug(Enum):
    """A planted bug; its value: the probe mode it must fail, and where it sits."""

    DECODE_CAPTURE = ("decode", "capture")
    """Capture makes plain-decode wrappers over a copy of ``kv_indptr``, which replays never write."""
    DECODE_REPLAY = ("decode", "replay")
    """Replay plans plain decode with ``seq_lens - 1``."""
    DRAFT_DECODE_CAPTURE = ("draft_decode", "capture")
    """Graph setup hands each step's sub-backend a copy of its ``kv_indices`` row."""
    DRAFT_DECODE_REPLAY = ("draft_decode", "replay")
    """Replay drops the draft spec-info: sub-backends plan plain decode over the prefix."""
    DRAFT_DECODE_TOPK = ("draft_decode", "topk > 1")
    """Each step's ``kv_indptr`` is sliced per sequence, not per branch (``num_seqs + 1``)."""
    VERIFY_CAPTURE = ("target_verify", "capture")
    """Capture makes the verify wrappers without the custom-mask buffers."""
    VERIFY_REPLAY = ("target_verify", "replay")
    """Replay plans target verify with ``seq_lens - 1``."""
    VERIFY_T_NE_N = ("target_verify", "T != N")
    """Replay sets the spec-info's draft length to the configured N."""
    DRAFT_EXTEND_CAPTURE = ("draft_extend", "capture")
    """Capture makes the draft-extend wrappers over one buffer for ``qo_indptr`` and ``kv_indptr``."""
    DRAFT_EXTEND_REPLAY = ("draft_extend", "replay")
    """Replay plans draft extend with ``seq_lens - 1``."""

    @property
    def mode(self) -> str:
        return self.value[0]


@dataclass(frozen=True)
class Variant:
    era: str
    bugs: frozenset[Bug] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if self.era not in ERAS:
            raise ValueError(f"unknown era {self.era!r}; eras: {', '.join(ERAS)}")

    def has(self, bug: Bug) -> bool:
        return bug in self.bugs
