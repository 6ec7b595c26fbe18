"""One revision of the SGLang-shaped ``triton_backend.py``: its era and planted bugs.

The eras follow the real file's CUDA-graph API (``probes.sglang.backends.triton``):

- ``T0`` capture/replay, decode and target verify only (no multi-step draft backend, no
  draft-extend graph);
- ``T1`` capture/replay with every mode: draft decode through ``TritonMultiStepDraftBackend``,
  draft extend (v2) in the graph paths;
- ``T3`` ``init_forward_metadata_out_graph(forward_batch, in_capture)`` running
  ``_apply_cuda_graph_metadata``, capture binding ``_build_cuda_graph_forward_metadata``.

Each planted bug breaks one mode's graph metadata (the T != N one only a decoupled target verify,
the topk one only draft extend at topk > 1) and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

BACKEND_PATH = "python/sglang/srt/layers/attention/triton_backend.py"
SPEC_UTILS_PATH = "python/sglang/srt/speculative/spec_utils.py"
ERAS = ("T0", "T1", "T3")


class Bug(Enum):
    """A planted bug; its value: the probe mode it must fail, and where it sits."""

    DECODE_CAPTURE = ("decode", "capture")
    """Capture hands the graph a copy of ``kv_indptr``, which replays never rewrite."""
    DECODE_REPLAY = ("decode", "replay")
    """Replay builds the KV indices of ``seq_lens - 1`` tokens, dropping the decoded one."""
    DRAFT_DECODE_CAPTURE = ("draft_decode", "capture")
    """A sub-backend's capture binds a copy of the step's ``kv_indptr`` row."""
    DRAFT_DECODE_REPLAY = ("draft_decode", "replay")
    """The multi-step replay launches the draft kernel with prefixes one token short."""
    VERIFY_CAPTURE = ("target_verify", "capture")
    """Capture bakes ``max_extend_len = 1``: the extend kernel runs one query row per request."""
    VERIFY_REPLAY = ("target_verify", "replay")
    """Replay builds the prefix KV indices over ``seq_lens + N`` (the draft tokens twice)."""
    VERIFY_T_NE_N = ("target_verify", "T != N")
    """Decoupled target verify: replay strides ``qo_indptr`` by N, not the captured T."""
    DRAFT_EXTEND_CAPTURE = ("draft_extend", "capture")
    """Capture bakes ``max_extend_len = 1``."""
    DRAFT_EXTEND_REPLAY = ("draft_extend", "replay")
    """Replay builds the prefix KV indices over ``seq_lens``, which count the extension too."""
    DRAFT_EXTEND_TOPK = ("draft_extend", "topk > 1")
    """``qo_indptr`` strided (and ``max_extend_len`` set) by ``num_steps + 1``, not the N tokens a
    request has: equal at topk 1, short at topk > 1."""

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
        if self.era == "T0" and any(bug.mode in ("draft_decode", "draft_extend") for bug in self.bugs):
            raise ValueError("era T0 has no draft decode or draft extend to plant a bug in")

    def has(self, bug: Bug) -> bool:
        return bug in self.bugs

    @property
    def drafts(self) -> bool:
        """Whether the era serves draft decode and draft extend."""
        return self.era != "T0"
