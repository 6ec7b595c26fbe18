"""What one generated revision of the SGLang-shaped tree looks like: its era and the edits on it.

The eras follow the real ``trtllm_mha_backend.py`` on SGLang's main branch (first-parent):

- ``A1`` separate ``init_forward_metadata_capture_cuda_graph`` / ``..._replay_cuda_graph``; the
  draft length N is used everywhere, the eager path included (T != N does not exist);
- ``A2`` the same entry points, T derived from the request shape (``num_tokens // bs``);
- ``B``  capture = ``_build_cuda_graph_metadata`` + the replay body;
- ``C1`` ``init_forward_metadata_out_graph(forward_batch, in_capture)`` with ``_build``/``_apply``;
- ``C2`` the page table built by a triton kernel, ``max_seq_len_k = max_context_len``;
- ``C3`` ``max_seq_len_k`` gone from the metadata;
- ``D1`` ``init_forward_metadata_in_graph`` and one fused triton metadata kernel;
- ``D2`` the kernels moved into ``sglang.kernels.ops.kvcache``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

ERAS = ("A1", "A2", "B", "C1", "C2", "C3", "D1", "D2")
BACKEND_PATH = "python/sglang/srt/layers/attention/trtllm_mha_backend.py"
FORWARD_BATCH_PATH = "python/sglang/srt/model_executor/forward_batch_info.py"
IMPORT_ROOT = "python"

OVERWRITE = "metadata.max_seq_len_q = self.speculative_num_draft_tokens"
"""The line of the story: the target-verify apply routine overwrites T with N."""


@dataclass(frozen=True)
class Variant:
    """One revision's content, as switches over the era's base code."""

    era: str
    overwrite: bool = False
    """The target-verify graph routine ends with :data:`OVERWRITE` (in A1 it always did)."""
    stub_call: bool = False
    """The eager target-verify path calls ``sgl_kernel`` (a stub while a probe runs)."""
    spec_v2: bool = False
    """C1 only: draft extend also serves ``DRAFT_EXTEND_V2`` (what #25002 added around the bug)."""
    v1_removed: bool = False
    """C1 only: ``ForwardMode.DRAFT_EXTEND`` (EAGLE v1) is gone; implied from C2 on."""
    backend_pools: bool = False
    """A only: the backend, not the ForwardBatch, holds ``req_to_token_pool``; implied from B on."""
    fb_note: int = 0
    """Revisions of a comment in ``forward_batch_info.py`` (a read file, no behaviour)."""
    spec_v2_note: bool = False
    """A comment in the backend's draft-extend code, from the large change that planted the bug."""

    def __post_init__(self) -> None:
        if self.era not in ERAS:
            raise ValueError(f"unknown era {self.era!r}; expected one of {', '.join(ERAS)}")

    def at_least(self, era: str) -> bool:
        return ERAS.index(self.era) >= ERAS.index(era)

    @property
    def family(self) -> str:
        return self.era[0]

    def normalized(self) -> Variant:
        """The switches that this era implies or does not have."""
        return replace(
            self,
            spec_v2=self.spec_v2 if self.era == "C1" else self.at_least("C2"),
            v1_removed=self.v1_removed if self.era == "C1" else self.at_least("C2"),
            backend_pools=self.backend_pools if self.family == "A" else True,
        )

    # ------------------------------------------------------------------ derived shapes

    @property
    def has_v1_draft_extend(self) -> bool:
        return not self.normalized().v1_removed

    @property
    def generic_t(self) -> bool:
        """T comes from the request shape (A2 on); in A1 it is N."""
        return self.era != "A1"

    @property
    def device_page_table(self) -> bool:
        """The page table comes from ``build_trtllm_mha_page_table`` (C2 on)."""
        return self.at_least("C2")

    @property
    def has_max_seq_len_k(self) -> bool:
        return not self.at_least("C3")

    @property
    def kernel_package(self) -> str:
        """Where the triton kernel modules live."""
        return "sglang.kernels.ops.kvcache" if self.at_least("D2") else "sglang.srt.layers.attention.triton_ops"

    def draft_extend_check(self, mode: str = "forward_mode") -> str:
        """The condition the graph paths use to recognise a draft-extend batch."""
        v = self.normalized()
        if v.v1_removed:
            return f"{mode}.is_draft_extend_v2()"
        if v.spec_v2:
            return f"{mode}.is_draft_extend(include_v2=True)"
        return f"{mode}.is_draft_extend()"

    def eager_draft_extend_check(self) -> str:
        """The eager path's condition (which always counted v2 in)."""
        if not self.has_v1_draft_extend:
            return "forward_batch.forward_mode.is_draft_extend_v2()"
        return "forward_batch.forward_mode.is_draft_extend(include_v2=True)"
