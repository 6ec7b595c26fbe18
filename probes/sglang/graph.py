"""CUDA-graph capture and replay of a revision's metadata routines, emulated on the CPU.

The emulation keeps what a real graph fixes at capture: the tensors the captured attention call
reads (whatever ``forward_metadata`` pointed to when the graph was captured), the Python scalars
handed to it (``max_seq_len_q`` is the kernel's ``q_len_per_req``), and, where a revision records
its metadata update inside the graph (``init_forward_metadata_in_graph``), the recorded ops with
their captured arguments: replay runs them again over the same static buffers, and writes their
temporaries back into the tensors captured (a graph's private memory pool), rather than running
the Python routine again.

The driving follows SGLang's graph runner: static batch buffers (padding rows: request 0, the
backend's fill length), capture once per batch size, and for each replay the buffers rewritten
in place, the replay-side routine, then the graph.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves, tree_map

from probes.sglang.fixture import Batch

CAPTURE_REPLAY = "capture/replay"
OUT_OF_GRAPH = "out-of-graph"
IN_GRAPH = "in-graph"
WARMUP_RUNS = 2
"""Eager runs of the graph body before capture, as SGLang's runner does."""


class GraphReplayError(RuntimeError):
    """A recorded op produced a tensor of another shape on replay: no graph could do that."""


@dataclass
class _Op:
    func: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    out: Any


class GraphRecording(TorchDispatchMode):
    """The torch ops run inside it, replayable with the arguments they had (a CPU CUDA graph)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[_Op] = []

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.ops.append(_Op(func, args, kwargs, out))
        return out

    def replay(self) -> None:
        memo: dict[int, torch.Tensor] = {}

        def current(value: Any) -> Any:
            return memo.get(id(value), value) if isinstance(value, torch.Tensor) else value

        for op in self.ops:
            args, kwargs = tree_map(current, (op.args, op.kwargs))
            self._bind(op, op.func(*args, **kwargs), memo)

    @staticmethod
    def _bind(op: _Op, result: Any, memo: dict[int, torch.Tensor]) -> None:
        returns = op.func._schema.returns
        for index, (old, new) in enumerate(zip(tree_leaves(op.out), tree_leaves(result))):
            if not isinstance(old, torch.Tensor):
                continue
            declared = returns[0] if len(returns) == 1 else returns[min(index, len(returns) - 1)]
            if declared.alias_info is not None:
                memo[id(old)] = new
                continue
            if old.shape != new.shape:
                raise GraphReplayError(
                    f"{op.func} gave shape {tuple(new.shape)} on replay, {tuple(old.shape)} at capture"
                )
            old.copy_(new)
            memo[id(old)] = old


@dataclass(frozen=True)
class MetadataView:
    """The target-verify/decode metadata one attention call reads, copied out."""

    q_len: int | None
    cache_seqlens: torch.Tensor | None
    page_table: torch.Tensor | None
    cu_seqlens_k: torch.Tensor | None
    swa_page_table: torch.Tensor | None
    swa_out_cache_loc: torch.Tensor | None
    max_seq_len_k: int | None = None


TENSOR_FIELDS = {
    "cache_seqlens": "cache_seqlens_int32",
    "page_table": "page_table",
    "cu_seqlens_k": "cu_seqlens_k",
    "swa_page_table": "swa_page_table",
    "swa_out_cache_loc": "swa_out_cache_loc",
}
"""MetadataView field -> the revision's TRTLLMMHAMetadata field."""


def _copy(value: Any) -> torch.Tensor | None:
    return value.detach().clone() if isinstance(value, torch.Tensor) else None


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, torch.Tensor)) and not isinstance(value, bool) else None


def read_metadata(metadata: Any) -> MetadataView:
    """What ``metadata`` holds now (an eager call's metadata, or the live replay state)."""
    tensors = {view: _copy(getattr(metadata, name, None)) for view, name in TENSOR_FIELDS.items()}
    return MetadataView(
        _int(getattr(metadata, "max_seq_len_q", None)),
        **tensors,
        max_seq_len_k=_int(getattr(metadata, "max_seq_len_k", None)),
    )


@dataclass
class Baked:
    """What the captured graph holds: the buffers its attention call reads and its q length."""

    q_len: int | None
    buffers: dict[str, torch.Tensor | None]

    @classmethod
    def capture(cls, metadata: Any) -> Baked:
        return cls(
            _int(getattr(metadata, "max_seq_len_q", None)),
            {v: getattr(metadata, n, None) for v, n in TENSOR_FIELDS.items()},
        )

    def read(self, live: Any) -> MetadataView:
        """What the graph's attention reads after a replay; ``max_seq_len_k`` (no kernel argument,
        it only sizes the copies) from the live metadata."""
        tensors = {name: _copy(buffer) for name, buffer in self.buffers.items()}
        return MetadataView(self.q_len, **tensors, max_seq_len_k=_int(getattr(live, "max_seq_len_k", None)))


@dataclass
class StaticBatch:
    """The graph runner's input buffers for batches up to ``bs`` requests of T tokens each."""

    bs: int
    tokens_per_req: int
    fill_value: int
    forward_mode: Any
    spec_info: Any
    host_copy: bool = True
    """Whether the backend is handed a host copy of ``seq_lens`` (``probes.sglang.fixture.Batch``)."""
    buffers: dict[str, torch.Tensor] = field(init=False)

    def __post_init__(self) -> None:
        tokens = self.bs * self.tokens_per_req
        self.buffers = {
            "req_pool_indices": torch.zeros(self.bs, dtype=torch.int64),
            "seq_lens": torch.full((self.bs,), self.fill_value, dtype=torch.int32),
            "seq_lens_cpu": torch.full((self.bs,), self.fill_value, dtype=torch.int32),
            "input_ids": torch.zeros(tokens, dtype=torch.int64),
            "positions": torch.zeros(tokens, dtype=torch.int64),
            "out_cache_loc": torch.zeros(tokens, dtype=torch.int64),
            "extend_seq_lens": torch.full((self.bs,), self.tokens_per_req, dtype=torch.int32),
        }

    def fill(self, batch: Batch) -> None:
        """Pad the tail and copy the live batch in, in place."""
        raw, tokens = batch.size, batch.size * self.tokens_per_req
        b = self.buffers
        b["req_pool_indices"][raw:].zero_()
        b["seq_lens"][raw:].fill_(self.fill_value)
        b["seq_lens_cpu"][raw:].fill_(self.fill_value)
        b["out_cache_loc"][tokens:].zero_()
        b["req_pool_indices"][:raw].copy_(batch.req_pool_indices)
        b["seq_lens"][:raw].copy_(batch.device_seq_lens())
        b["seq_lens_cpu"][:raw].copy_(batch.device_seq_lens())
        b["out_cache_loc"][:tokens].copy_(batch.out_cache_loc)

    def view(self, out_cache_loc: torch.Tensor | None = None) -> SimpleNamespace:
        """The ForwardBatch view the backend sees (SGLang's ``build_replay_fb_view``)."""
        b = self.buffers
        return SimpleNamespace(
            batch_size=self.bs,
            forward_mode=self.forward_mode,
            input_ids=b["input_ids"],
            positions=b["positions"],
            req_pool_indices=b["req_pool_indices"],
            seq_lens=b["seq_lens"],
            seq_lens_cpu=b["seq_lens_cpu"] if self.host_copy else None,
            seq_lens_sum=int(b["seq_lens_cpu"].sum()) if self.host_copy else None,
            out_cache_loc=b["out_cache_loc"] if out_cache_loc is None else out_cache_loc,
            extend_seq_lens=b["extend_seq_lens"],
            encoder_lens=None,
            spec_info=self.spec_info,
        )


def call_with(function: Callable[..., Any], **available: Any) -> Any:
    """Call ``function`` with the keyword arguments its signature names."""
    parameters = inspect.signature(function).parameters
    missing = [
        n
        for n, p in parameters.items()
        if p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD and n not in available
    ]
    if missing:
        raise TypeError(f"{function.__qualname__} wants {', '.join(missing)}, which the graph runner does not pass")
    return function(**{name: value for name, value in available.items() if name in parameters})


class CapturedGraph:
    """One captured graph of batch size ``bs`` over a revision's backend."""

    def __init__(self, backend: Any, api: str, static: StaticBatch) -> None:
        self.backend = backend
        self.api = api
        self.static = static
        self.recording: GraphRecording | None = None
        self.baked: Baked | None = None

    def capture(self) -> MetadataView:
        """Capture; returns what the graph baked (read right after capture)."""
        view, b = self.static.view(), self.backend
        if self.api == CAPTURE_REPLAY:
            call_with(
                b.init_forward_metadata_capture_cuda_graph,
                bs=view.batch_size,
                num_tokens=view.input_ids.numel(),
                req_pool_indices=view.req_pool_indices,
                seq_lens=view.seq_lens,
                encoder_lens=None,
                forward_mode=view.forward_mode,
                spec_info=view.spec_info,
            )
        else:
            b.init_forward_metadata_out_graph(view, in_capture=True)
        if self.api == IN_GRAPH:
            for _ in range(WARMUP_RUNS):
                b.init_forward_metadata_in_graph(view)
            with GraphRecording() as self.recording:
                b.init_forward_metadata_in_graph(view)
        self.baked = Baked.capture(b.forward_metadata)
        return self.baked.read(b.forward_metadata)

    def replay(self, batch: Batch) -> MetadataView:
        """Serve ``batch`` with the graph; returns what its attention call reads."""
        if self.baked is None:
            raise RuntimeError("replay before capture")
        self.static.fill(batch)
        view, b = self.static.view(out_cache_loc=batch.out_cache_loc), self.backend
        if self.api == CAPTURE_REPLAY:
            call_with(
                b.init_forward_metadata_replay_cuda_graph,
                bs=view.batch_size,
                req_pool_indices=view.req_pool_indices,
                seq_lens=view.seq_lens,
                seq_lens_sum=view.seq_lens_sum,
                encoder_lens=None,
                forward_mode=view.forward_mode,
                spec_info=view.spec_info,
                seq_lens_cpu=view.seq_lens_cpu,
                out_cache_loc=view.out_cache_loc,
            )
        else:
            b.init_forward_metadata_out_graph(view)
        if self.recording is not None:
            self.recording.replay()
        return self.baked.read(b.forward_metadata)
