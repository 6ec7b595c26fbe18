"""SGLang's Triton attention backend (``triton_backend.py``) as an :class:`Adapter`.

``TritonAttnBackend`` keeps its metadata in ``ForwardMetadata``: flat ``kv_indices`` with
``kv_indptr`` (decode: the whole KV; target verify and draft extend: the cached prefix only, the
extend kernel reads the query tokens' own K/V from the batch), ``qo_indptr`` and
``max_extend_len`` for the extend kernel, and the verify tree mask with ``mask_indptr``. Draft
decode is served by ``TritonMultiStepDraftBackend``, which fills every step's KV indices in one
launch and hands step i to its sub-backend i. Eras are told by what the class defines: separate
capture and replay bodies (T1), buffer helpers shared by both (T2), the out-of-graph entry point
(T3).
"""

from __future__ import annotations

import inspect
from types import ModuleType, SimpleNamespace
from typing import Any

import torch

from probes.sglang.backends.base import YES, Adapter, AttentionRead, Era, Mode, Shape, Support
from probes.sglang.backends.triton_driven import Driven, spec_input
from probes.sglang.backends.triton_read import TritonCall, read
from probes.sglang.fixture import MAX_CONTEXT_LEN, MAX_REQS, Pool, _set
from probes.sglang.graph import CAPTURE_REPLAY, OUT_OF_GRAPH
from probes.sglang.kernels_triton import KERNELS

BACKEND_CLASS = "TritonAttnBackend"
MULTI_STEP_CLASS = "TritonMultiStepDraftBackend"
API_METHODS = (
    "init_forward_metadata_capture_cuda_graph",
    "init_forward_metadata_replay_cuda_graph",
    "_build_cuda_graph_forward_metadata",
    "_apply_cuda_graph_metadata",
    "init_forward_metadata_out_graph",
)
NUM_HEADS, HEAD_DIM, KV_SPLITS = 4, 8, 8
"""Sizes of the attention buffers the metadata paths allocate; they hold no metadata."""


def detect_era(module: ModuleType) -> Era:
    """T1: separate capture and replay bodies; T2: capture and replay fill the same buffer helpers
    and capture binds them with ``_build_cuda_graph_forward_metadata``; T3: out-of-graph."""
    backend = getattr(module, BACKEND_CLASS, None)
    if not isinstance(backend, type):
        return Era("?", None, (f"no class {BACKEND_CLASS}",))
    own = set(vars(backend))
    findings = [f"defines {name}" for name in API_METHODS if name in own]
    findings += [f"calls {name} from {origin}" for name, origin in _kernel_origins(module).items()]
    if "init_forward_metadata_out_graph" in own:
        return Era("T3", OUT_OF_GRAPH, tuple(findings))
    if {"init_forward_metadata_capture_cuda_graph", "init_forward_metadata_replay_cuda_graph"} <= own:
        label = "T2" if "_build_cuda_graph_forward_metadata" in own else "T1"
        return Era(label, CAPTURE_REPLAY, tuple(findings))
    return Era("?", None, tuple(findings) or ("no CUDA-graph metadata entry point",))


def _kernel_origins(module: ModuleType) -> dict[str, str]:
    """Known metadata kernels the module imports -> the module that defines them."""
    found = {}
    for name in KERNELS:
        function = vars(module).get(name)
        if function is not None:
            original = getattr(function, "__wrapped__", None) or function
            found[name] = getattr(original, "__module__", "?")
    return found


class Triton(Adapter):
    name = "triton"
    module = "sglang.srt.layers.attention.triton_backend"
    backend_class = BACKEND_CLASS

    def era(self, module: ModuleType) -> Era:
        return detect_era(module)

    def supports(self, module: ModuleType, era: Era, shape: Shape) -> Support:
        if shape.mode is Mode.DRAFT_DECODE:
            if not isinstance(getattr(module, MULTI_STEP_CLASS, None), type):
                return Support.no(f"no draft decode: the module has no {MULTI_STEP_CLASS}")
            if not 0 <= shape.step < shape.num_steps - 1:
                return Support.no(f"step {shape.step}: the multi-step draft backend has num_steps - 1 sub-backends")
        if shape.mode is Mode.DRAFT_EXTEND and "draft_extend" not in _source(getattr(module, BACKEND_CLASS)):
            return Support.no("no draft-extend CUDA graph: the backend's code never mentions draft extend")
        return YES

    def make(self, module: ModuleType, pool: Pool, shape: Shape) -> Driven:
        if shape.mode is Mode.DRAFT_DECODE:
            draft = _multi_step(module, pool, shape)
            draft.init_cuda_graph_state(shape.bs, shape.bs * shape.topk)
            return Driven(draft.attn_backends[shape.step], shape, pool.req_to_token, draft)
        backend = _backend(module, pool, shape, kv_indptr=None)
        tokens_per_req = max(shape.tokens_per_req, shape.draft_tokens, 1)
        backend.init_cuda_graph_state(shape.bs, shape.bs * tokens_per_req)
        return Driven(backend, shape, pool.req_to_token)

    def spec_info(self, module: ModuleType, shape: Shape, batch: Any) -> Any:
        return spec_input(shape)

    def bake(self, backend: Driven, shape: Shape) -> TritonCall:
        return TritonCall.of(backend.forward_metadata, backend.seen)

    def read(self, source: TritonCall, shape: Shape, rows: int, pool: Pool) -> AttentionRead:
        return read(source, shape, rows, pool.req_to_token)


def speculative_config(shape: Shape) -> tuple[int, int]:
    """(num_draft_tokens, speculative_num_steps) of the server a batch of ``shape`` comes from: a
    draft-extend graph lays out N tokens per request, so its batches have T = N; at topk 1 SGLang
    ties N to num_steps + 1."""
    if shape.mode is Mode.DRAFT_EXTEND:
        width = shape.tokens_per_req
        return width, (width - 1 if shape.topk == 1 else shape.num_steps)
    return shape.draft_tokens, shape.num_steps


def _backend(module: ModuleType, pool: Pool, shape: Shape, kv_indptr: torch.Tensor | None) -> Any:
    """A ``TritonAttnBackend`` made with ``__new__`` and the attributes its metadata paths read
    (the union over the eras); ``kv_indptr`` is a multi-step draft backend's row for a sub-backend."""
    backend_class = getattr(module, BACKEND_CLASS)
    backend = backend_class.__new__(backend_class)
    draft_tokens, num_steps = speculative_config(shape)
    max_bs = MAX_REQS * max(shape.topk, 1)
    attributes: dict[str, Any] = {
        "device": torch.device("cpu"),
        "req_to_token": pool.req_to_token,
        "req_to_token_pool": SimpleNamespace(req_to_token=pool.req_to_token, size=MAX_REQS),
        "token_to_kv_pool": SimpleNamespace(),
        "token_to_kv_pool_allocator": SimpleNamespace(),
        "_translate_kv_loc": None,
        "use_sliding_window_kv_pool": False,
        "sliding_window_size": None,
        "window_kv_indptr": None,
        "page_size": pool.page_size,
        "num_draft_tokens": draft_tokens,
        "speculative_num_steps": num_steps,
        "topk": shape.topk,
        "use_mla": False,
        "use_verify_splitkv": False,
        "dcp_size": 1,
        "dcp_rank": 0,
        "num_head": NUM_HEADS,
        "num_kv_head": 1,
        "v_head_dim": HEAD_DIM,
        "swa_v_head_dim": None,
        "max_context_len": MAX_CONTEXT_LEN,
        "device_core_count": 0,
        "static_kv_splits": True,
        "max_kv_splits": KV_SPLITS,
        "enable_deterministic": False,
        "split_tile_size": None,
        "use_pdl": False,
        "skip_prefill": kv_indptr is not None,
        "allow_bidirectional_attention_in_extend": False,
        "is_draft_runner": kv_indptr is not None,
        "kv_indptr": torch.zeros(max_bs + 1, dtype=torch.int32) if kv_indptr is None else kv_indptr,
        "qo_indptr": torch.zeros(max_bs + 1, dtype=torch.int64),
        "mask_indptr": torch.zeros(max_bs + 1, dtype=torch.int64),
        "forward_metadata": None,
        "cuda_graph_custom_mask": None,
    }
    for name, value in attributes.items():
        _set(backend, name, value)
    return backend


def _multi_step(module: ModuleType, pool: Pool, shape: Shape) -> Any:
    """A ``TritonMultiStepDraftBackend`` over num_steps - 1 sub-backends sharing its indptr rows."""
    draft_class = getattr(module, MULTI_STEP_CLASS)
    draft = draft_class.__new__(draft_class)
    max_bs = MAX_REQS * shape.topk
    kv_indptr = torch.zeros(shape.num_steps, max_bs + 1, dtype=torch.int32)
    attributes: dict[str, Any] = {
        "topk": shape.topk,
        "speculative_num_steps": shape.num_steps,
        "kv_indptr": kv_indptr,
        "attn_backends": [_backend(module, pool, shape, kv_indptr[i]) for i in range(shape.num_steps - 1)],
        "max_context_len": MAX_CONTEXT_LEN,
        "num_head": NUM_HEADS,
        "device": torch.device("cpu"),
        "req_to_token_pool": SimpleNamespace(req_to_token=pool.req_to_token, size=MAX_REQS),
        "pool_len": pool.req_to_token.shape[1],
        "page_size": pool.page_size,
    }
    for name, value in attributes.items():
        _set(draft, name, value)
    return draft


def _source(cls: Any) -> str:
    try:
        return inspect.getsource(cls) if isinstance(cls, type) else ""
    except (OSError, TypeError):
        return ""


ADAPTER = Triton()
