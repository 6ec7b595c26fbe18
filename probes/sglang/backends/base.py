"""What the invariant probes need to know of one SGLang attention backend, in one interface.

Every backend with CUDA-graph paths computes, for each forward mode, the metadata its attention
call reads (query widths, KV lengths, page tables or KV indices, indptrs, masks) once eagerly and
once for a captured graph, rebuilt in place at every replay. The probes judge that metadata
backend-neutrally: an :class:`Adapter` makes the revision's backend on the CPU, says which modes
its era serves, and turns what its attention call would read into an :class:`AttentionRead`
(per live request: query length, KV length, the KV token slots read in order), which the probes
compare with the closed form of the batch and with the eager path's.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import KW_ONLY, dataclass, field
from enum import Enum
from types import ModuleType
from typing import Any

import torch

from probes.sglang.fixture import Pool


class Mode(str, Enum):
    """SGLang's forward modes with CUDA-graph metadata paths."""

    DECODE = "decode"
    DRAFT_DECODE = "draft_decode"
    """The draft model's decode at one speculative step (a multi-step draft backend's sub-backend)."""
    TARGET_VERIFY = "target_verify"
    DRAFT_EXTEND = "draft_extend"


@dataclass(frozen=True)
class Shape:
    """The batch a mode is judged with."""

    mode: Mode
    page_size: int
    bs: int
    """The graph's batch size (live batches may be smaller: padded)."""
    draft_tokens: int = 0
    """N: the backend's configured ``speculative_num_draft_tokens``."""
    tokens_per_req: int = 1
    """T: query tokens of each request (decode: 1; target verify: the captured request shape)."""
    topk: int = 1
    num_steps: int = 1
    """``speculative_num_steps``."""
    step: int = 0
    """Draft decode: the speculative step judged."""
    host_copy: bool = True
    """Whether the runner hands the backend a host copy of ``seq_lens`` (``fixture.Batch``)."""


@dataclass(frozen=True)
class Support:
    """Whether a revision's backend serves a mode at a shape; ``reason`` says why not."""

    ok: bool
    reason: str = ""

    @classmethod
    def no(cls, reason: str) -> Support:
        return cls(False, reason)


YES = Support(True)


@dataclass(frozen=True)
class Era:
    """Which metadata API a revision's backend has, told by what its class defines."""

    label: str
    api: str | None
    """How the graph runner drives it (``probes.sglang.graph``); None: no known graph API."""
    findings: tuple[str, ...]

    def describe(self) -> str:
        return f"era {self.label}: " + "; ".join(self.findings)


@dataclass
class AttentionRead:
    """What one attention call reads for the live requests, backend-neutrally."""

    q_lens: list[int]
    """Query tokens of each live request."""
    kv_lens: list[int]
    """KV tokens each live request attends to."""
    kv_slots: list[torch.Tensor]
    """Per request, the KV token slots the call reads, in order (``kv_lens[b]`` of them)."""
    _: KW_ONLY
    rows: list[torch.Tensor] | None = None
    """Where the call's query rows read different KV (topk > 1): the slots each row reads,
    request-major (a draft branch each, or a draft-tree token each, masks applied)."""
    problems: list[str] = field(default_factory=list)
    """Inconsistencies found while reading (an indptr that is not the running sum of the lengths,
    a missing buffer): each a short stable phrase."""


class Stand:
    """What an adapter hands the graph runner where it must do part of the runner's work (drive a
    multi-step draft backend, lay out a mask per batch): the attributes the judge reads of a
    backend are ``backend``'s."""

    backend: Any

    @property
    def forward_metadata(self) -> Any:
        return self.backend.forward_metadata

    @property
    def req_to_token_pool(self) -> Any:
        return self.backend.req_to_token_pool

    @property
    def token_to_kv_pool(self) -> Any:
        return self.backend.token_to_kv_pool

    def get_cuda_graph_seq_len_fill_value(self) -> int:
        return int(self.backend.get_cuda_graph_seq_len_fill_value())


class Adapter(ABC):
    """One backend's class and module, its eras, how it is made on the CPU and how it is read."""

    name: str
    """Short name used in probe names: ``trtllm_mha``, ``fa3``, ``triton``, ``flashinfer``."""
    module: str
    """The revision module that defines the backend."""
    backend_class: str

    @abstractmethod
    def era(self, module: ModuleType) -> Era:
        """The era of the revision's backend module."""

    @abstractmethod
    def supports(self, module: ModuleType, era: Era, shape: Shape) -> Support:
        """Whether the revision serves ``shape``'s mode (and topk, T != N ...) at all."""

    @abstractmethod
    def make(self, module: ModuleType, pool: Pool, shape: Shape) -> Any:
        """The revision's backend (for draft decode: the sub-backend of ``shape.step``), made on the
        CPU with ``__new__`` and the attributes its metadata paths read, its CUDA-graph state set up
        for ``shape.bs`` requests."""

    @abstractmethod
    def spec_info(self, module: ModuleType, shape: Shape, batch: Any) -> Any:
        """The spec-info object a batch of ``shape.mode`` carries (None for plain decode)."""

    @abstractmethod
    def bake(self, backend: Any, shape: Shape) -> Any:
        """After capture: references to the buffers the captured attention call reads, and copies
        of the Python scalars it was handed (a graph keeps both)."""

    @abstractmethod
    def read(self, source: Any, shape: Shape, rows: int, pool: Pool) -> AttentionRead:
        """What the attention call reads for the first ``rows`` requests: ``source`` is what
        :meth:`bake` returned (a graph replay) or :meth:`bake` of the backend right after its
        eager ``init_forward_metadata``."""
