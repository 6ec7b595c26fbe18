"""FlashInfer (``flashinfer_backend.py``) as an :class:`Adapter`.

The backend builds no metadata record of its own: it hands each FlashInfer wrapper's ``plan``
the request layout (``qo_indptr``, ``kv_indptr``, ``kv_indices`` of token slots, page size 1,
a packed custom mask for target verify), and a wrapper made for CUDA graphs copies it into fixed
buffers that the captured kernel reads. What a call reads is therefore those buffers (and the
Python scalars the graph keeps: the page size). Decode plans the decode wrapper from
``seq_lens``; target verify and draft extend let the spec-info build the layout
(``generate_attn_arg_prefill``); draft decode is the multi-step draft backend's: one kernel
(``generate_draft_decode_kv_indices``) writes every step's indptr and indices rows, which its
sub-backends' wrappers read in place.

| era | feature of ``FlashInferAttnBackend`` |
|---|---|
| A  | ``init_forward_metadata_capture_cuda_graph`` / ``..._replay_cuda_graph``, wrappers made inline |
| A2 | the same entry points, wrappers made by ``_prepare_cuda_graph_metadata`` |
| B  | ``init_forward_metadata_out_graph(forward_batch, in_capture)`` |

Draft extend: v1 (``is_draft_extend()``) in the capture path of era A; v2
(``is_draft_extend_v2()``) once the out-of-graph path names it; the revision's ``ForwardMode``
decides which one the runner serves.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from types import ModuleType, SimpleNamespace
from typing import Any

import torch

from probes.sglang import fixture, kernels_flashinfer
from probes.sglang.backends import flashinfer_read as read_buffers
from probes.sglang.backends import flashinfer_setup as setup
from probes.sglang.backends.base import YES, Adapter, AttentionRead, Era, Mode, Shape, Stand, Support
from probes.sglang.fixture import MAX_CONTEXT_LEN, Pool, verify_mask
from probes.sglang.graph import CAPTURE_REPLAY, OUT_OF_GRAPH, call_with
from probes.sglang.kernels_flashinfer import PlanRejected

SPEC_MODULE = "sglang.srt.speculative.eagle_info"
BUFFERS = {
    "qo_indptr": "_qo_indptr_buf",
    "kv_indptr": "_paged_kv_indptr_buf",
    "kv_indices": "_paged_kv_indices_buf",
    "last_page_len": "_paged_kv_last_page_len_buf",
    "mask": "_custom_mask_buf",
    "mask_indptr": "_mask_indptr_buf",
}
"""AttentionRead inputs -> the wrapper attribute holding them."""


class Served(Stand):
    """What the graph runner and the eager path drive for one mode: the revision's backend, or for
    draft decode its multi-step draft backend (read at ``shape.step``), behind the entry points
    of the era, with the batch fields SGLang's runner adds for the mode."""

    def __init__(self, backend: Any, shape: Shape, pool: Pool, multi: Any = None) -> None:
        self.backend, self.shape, self.pool, self.multi = backend, shape, pool, multi
        self.rejected: str | None = None
        """Why FlashInfer refused the last plan (the metadata then stays as it was)."""
        self.uncaptured: str | None = None
        """Why capture failed: there is no graph to replay."""

    def _run(self, function: Any, *args: Any, capture: bool = False, replay: bool = False, **kwargs: Any) -> None:
        if replay and self.uncaptured:
            self.rejected = self.uncaptured
            return
        self.rejected = None
        try:
            setup.on_cpu(function)(*args, **kwargs)
        except PlanRejected as refusal:
            self.rejected = refusal.phrase
            self.uncaptured = f"{refusal.phrase} (at capture)" if capture else self.uncaptured

    def _batch(self, forward_batch: Any) -> SimpleNamespace:
        """The batch as SGLang's runner hands it over: with the fields the mode adds, and for
        target verify the draft mask laid out for its requests."""
        self._lay_out_mask(getattr(forward_batch, "spec_info", None), forward_batch.seq_lens)
        fields = dict(vars(forward_batch))
        fields.setdefault("req_to_token_pool", SimpleNamespace(req_to_token=self.pool.req_to_token))
        fields.update(setup.eager_extras(self.shape, forward_batch))
        return SimpleNamespace(**fields)

    def _lay_out_mask(self, spec_info: Any, seq_lens: torch.Tensor) -> None:
        """Target verify: the draft tree's mask (a chain at topk 1) for requests of ``seq_lens``,
        as the speculative worker builds it for each batch."""
        if self.shape.mode is Mode.TARGET_VERIFY and spec_info is not None:
            chain = torch.tril(torch.ones(self.shape.tokens_per_req, self.shape.tokens_per_req, dtype=torch.bool))
            tree = getattr(spec_info, "tree", None)
            spec_info.custom_mask = verify_mask(chain if tree is None else tree, seq_lens.tolist())

    def init_forward_metadata(self, forward_batch: Any) -> None:
        target = self.multi or self.backend
        self._run(target.init_forward_metadata, self._batch(forward_batch))

    def init_forward_metadata_out_graph(self, forward_batch: Any, in_capture: bool = False) -> None:
        target = self.multi or self.backend
        if not hasattr(target, "init_forward_metadata_out_graph"):
            raise TypeError(f"{type(target).__name__} has no init_forward_metadata_out_graph")
        self._run(
            target.init_forward_metadata_out_graph,
            self._batch(forward_batch),
            in_capture=in_capture,
            capture=in_capture,
            replay=not in_capture,
        )

    def init_forward_metadata_capture_cuda_graph(
        self,
        bs: int,
        num_tokens: int,
        req_pool_indices: Any,
        seq_lens: Any,
        encoder_lens: Any,
        forward_mode: Any,
        spec_info: Any,
    ) -> None:
        if self.multi is None:
            arguments = _drop_self(locals())
            self._lay_out_mask(spec_info, seq_lens)
            self._run(call_with, self.backend.init_forward_metadata_capture_cuda_graph, capture=True, **arguments)
            return
        batch = self._draft_batch(bs, req_pool_indices, seq_lens, seq_lens.clone(), forward_mode, spec_info)
        self._run(self.multi.init_forward_metadata_capture_cuda_graph, batch, capture=True)

    def init_forward_metadata_replay_cuda_graph(
        self,
        bs: int,
        req_pool_indices: Any,
        seq_lens: Any,
        seq_lens_sum: int,
        encoder_lens: Any,
        forward_mode: Any,
        spec_info: Any,
        seq_lens_cpu: Any,
    ) -> None:
        if self.multi is None:
            arguments = _drop_self(locals())
            self._lay_out_mask(spec_info, seq_lens)
            self._run(call_with, self.backend.init_forward_metadata_replay_cuda_graph, replay=True, **arguments)
            return
        batch = self._draft_batch(bs, req_pool_indices, seq_lens, seq_lens_cpu, forward_mode, spec_info)
        self._run(self.multi.init_forward_metadata_replay_cuda_graph, batch, bs, replay=True)

    def _draft_batch(self, bs: int, req: Any, seq_lens: Any, seq_lens_cpu: Any, mode: Any, spec_info: Any) -> Any:
        return self._batch(
            SimpleNamespace(
                batch_size=bs,
                forward_mode=mode,
                req_pool_indices=req,
                seq_lens=seq_lens,
                seq_lens_cpu=seq_lens_cpu,
                seq_lens_sum=int(seq_lens_cpu.sum()),
                spec_info=spec_info,
                encoder_lens=None,
                out_cache_loc=None,
            )
        )


def _drop_self(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if k != "self"}


@dataclass(frozen=True)
class WrapperRead:
    """What a call reads: the wrapper's buffers (the tensors themselves, as a graph keeps them)
    and the page size its plan was given."""

    buffers: dict[str, torch.Tensor | None]
    page_size: int
    prefill: bool
    served: Served


class FlashInfer(Adapter):
    name = "flashinfer"
    module = "sglang.srt.layers.attention.flashinfer_backend"
    backend_class = setup.BACKEND_CLASS

    def era(self, module: ModuleType) -> Era:
        backend = getattr(module, self.backend_class, None)
        if not isinstance(backend, type):
            return Era("?", None, (f"no class {self.backend_class}",))
        own = set(vars(backend))
        findings = [f"defines {name}" for name in sorted(own & set(setup.GRAPH_METHODS))]
        findings += [f"{mode} CUDA graph" for mode in _graph_modes(backend)]
        if "fast_prefill_plan" in vars(module):
            findings.append("draft extend replays plan through fast_prefill_plan")
        if "init_forward_metadata_out_graph" in own:
            return Era("B", OUT_OF_GRAPH, tuple(findings))
        if {"init_forward_metadata_capture_cuda_graph", "init_forward_metadata_replay_cuda_graph"} <= own:
            label = "A2" if "_prepare_cuda_graph_metadata" in own else "A"
            return Era(label, CAPTURE_REPLAY, tuple(findings))
        return Era("?", None, tuple(findings) or ("no CUDA-graph metadata entry point",))

    def supports(self, module: ModuleType, era: Era, shape: Shape) -> Support:
        backend = getattr(module, self.backend_class)
        if shape.mode is Mode.DECODE:
            return YES if shape.topk == 1 else Support.no("plain decode has no draft tree (topk)")
        if shape.mode is Mode.DRAFT_DECODE:
            if not isinstance(getattr(module, setup.MULTI_STEP_CLASS, None), type):
                return Support.no(f"no draft decode: the module has no {setup.MULTI_STEP_CLASS}")
            if not 0 <= shape.step < shape.num_steps - 1:
                return Support.no(f"draft decode has sub-backends for steps 0..{shape.num_steps - 2} only")
            return YES
        wanted = _draft_extend_mode(module) if shape.mode is Mode.DRAFT_EXTEND else "target verify"
        if wanted not in _graph_modes(backend):
            return Support.no(f"no {wanted} CUDA graph: the graph metadata paths never name it")
        return YES

    def make(self, module: ModuleType, pool: Pool, shape: Shape) -> Served:
        kernels_flashinfer.install(module)
        tokens = shape.bs * max(shape.tokens_per_req, shape.draft_tokens, shape.topk, 1)
        if shape.mode is Mode.DRAFT_DECODE:
            multi = setup.make_multi_step(module, pool, shape)
            return Served(multi.attn_backends[shape.step], shape, pool, multi)
        backend = setup.make_backend(module, pool, tokens, draft_tokens=shape.draft_tokens)
        backend.init_cuda_graph_state(shape.bs, tokens)
        return Served(backend, shape, pool)

    def spec_info(self, module: ModuleType, shape: Shape, batch: Any) -> Any:
        if shape.mode is Mode.DECODE:
            return None
        spec = importlib.import_module(SPEC_MODULE)
        bs, T = shape.bs, shape.tokens_per_req
        if shape.mode is Mode.TARGET_VERIFY:
            verify = setup.dataclass_instance(
                spec.EagleVerifyInput,
                draft_token_num=T,
                num_tokens_per_req=T,
                topk=shape.topk,
                spec_steps=shape.num_steps,
                custom_mask=torch.ones(bs * T * MAX_CONTEXT_LEN, dtype=torch.bool),
                ragged_verify_layout=None,
            )
            if shape.topk > 1:
                verify.tree = fixture.draft_tree(T, torch.Generator().manual_seed(T))
            return verify
        if shape.mode is Mode.DRAFT_DECODE:
            return setup.dataclass_instance(spec.EagleDraftInput, kv_indptr=None, kv_indices=None)
        cls = getattr(spec, "EagleDraftExtendInput", None) or spec.EagleDraftInput
        counts = torch.full((bs,), T, dtype=torch.int32)
        return setup.dataclass_instance(
            cls,
            num_correct_drafts=counts - 1,
            num_accept_tokens=counts,
            accept_length=counts,
            num_tokens_per_req=T,
            num_tokens_per_batch=T,
        )

    def bake(self, backend: Served, shape: Shape) -> WrapperRead:
        metadata = backend.forward_metadata
        if metadata is None:
            return WrapperRead({name: None for name in BUFFERS}, 1, False, backend)
        wrappers = getattr(metadata, "prefill_wrappers", None) or metadata.decode_wrappers
        wrapper = wrappers[0]
        buffers = {name: getattr(wrapper, attribute, None) for name, attribute in BUFFERS.items()}
        plans = getattr(wrapper, "plans", [])
        page_size = plans[-1].page_size if plans else 1
        return WrapperRead(buffers, page_size, hasattr(metadata, "prefill_wrappers"), backend)

    def read(self, source: WrapperRead, shape: Shape, rows: int, pool: Pool) -> AttentionRead:
        b = {name: (t.detach().clone() if isinstance(t, torch.Tensor) else None) for name, t in source.buffers.items()}
        refused = [f"FlashInfer refused the plan: {source.served.rejected}"] if source.served.rejected else []
        if b["kv_indptr"] is None or b["kv_indices"] is None or b["last_page_len"] is None:
            return AttentionRead([], [], [], problems=[*refused, "kv_indptr, kv_indices or last_page_len missing"])
        width = shape.topk if shape.mode is Mode.DRAFT_DECODE else 1
        layout = read_buffers.layout(
            b["kv_indptr"], b["kv_indices"], b["last_page_len"], source.page_size, rows * width
        )
        query_rows = None
        if width > 1:
            query_rows = layout.kv_slots
        q_lens = [1] * rows
        if source.prefill and b["qo_indptr"] is not None:
            q_lens = (b["qo_indptr"][1 : rows + 1] - b["qo_indptr"][:rows]).tolist()
            masked = read_buffers.masked_rows(b, q_lens, layout, rows)
            query_rows = masked if isinstance(masked, list) else None
            layout.problems += [masked] if isinstance(masked, str) else []
        return AttentionRead(
            q_lens,
            layout.kv_lens[::width],
            layout.kv_slots[::width],
            rows=query_rows,
            problems=refused + layout.problems,
        )


def _graph_modes(backend: type) -> list[str]:
    """The speculative modes the backend's CUDA-graph entry points name."""
    source = ""
    for name in (*setup.GRAPH_METHODS, "_prepare_cuda_graph_metadata"):
        method = vars(backend).get(name)
        try:
            source += inspect.getsource(method) if method is not None else ""
        except (OSError, TypeError):
            continue
    found = []
    if "is_target_verify()" in source:
        found.append("target verify")
    if "is_draft_extend_v2()" in source:
        found.append("draft extend v2")
    if "is_draft_extend()" in source:
        found.append("draft extend v1")
    return found


def _draft_extend_mode(module: ModuleType) -> str:
    """The draft extend the revision's runner serves: v2 where ``ForwardMode`` has it."""
    modes = getattr(module, "ForwardMode", None)
    return "draft extend v2" if hasattr(modes, "DRAFT_EXTEND_V2") else "draft extend v1"


ADAPTER = FlashInfer()
