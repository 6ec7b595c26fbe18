"""FlashAttention (``flashattention_backend.py``, FA3) as an :class:`Adapter`.

Its metadata record (``FlashAttentionMetadata``) holds what ``flash_attn_with_kvcache`` reads
(``probes.sglang.backends.fa3_read``); with topk > 1 a draft decode or target verify hands a
second record, ``forward_metadata_spec_decode_expand``, to the cascade's expand call. Draft decode
is served by ``FlashAttentionMultiStepBackend``'s sub-backends, ``FlashAttentionBackend`` objects
with ``speculative_step_id`` set, which the adapter makes directly.
"""

from __future__ import annotations

import inspect
from types import ModuleType, SimpleNamespace
from typing import Any

import torch

from probes.sglang.backends.base import YES, Adapter, AttentionRead, Era, Mode, Shape, Support
from probes.sglang.backends.fa3_read import FlashCall, FlashCalls, read_calls
from probes.sglang.fixture import MAX_CONTEXT_LEN, DraftInput, Pool, VerifyInput
from probes.sglang.graph import CAPTURE_REPLAY, IN_GRAPH, OUT_OF_GRAPH
from probes.sglang.kernels_fa3 import FUSED_DECODE_MARKERS, KERNELS

BACKEND_CLASS = "FlashAttentionBackend"
MULTI_STEP_CLASS = "FlashAttentionMultiStepBackend"
CASCADE_RECORD = "forward_metadata_spec_decode_expand"
CASCADE_MODES = (Mode.DRAFT_DECODE, Mode.TARGET_VERIFY)
"""The modes whose topk > 1 batches the backend serves with a cascade of two attention calls."""
LAUNCHERS = (*KERNELS, "build_trtllm_mha_page_table")
"""The metadata launchers whose origin tells an era."""


class EraDraftInput(DraftInput):
    """A draft batch's spec-info under both names its tokens per request had (``num_tokens_per_batch``
    before the rename to ``num_tokens_per_req``): a revision that reads the old name with a default
    must not fall back to the default."""

    @property
    def num_tokens_per_batch(self) -> int:
        return self.num_tokens_per_req


class TreeVerifyInput(VerifyInput):
    """A target-verify spec-info that also carries SGLang's ``positions`` for a draft tree (each
    draft token's position: its request's ``seq_len`` plus its depth): the topk > 1 replay reads
    only the mask rows of the live draft tokens, as many as ``positions`` has."""

    positions: torch.Tensor | None = None

    def bind(self, seq_lens: list[int]) -> None:
        super().bind(seq_lens)
        if self.tree is not None:
            depth = self.tree.sum(dim=1) - 1
            self.positions = torch.cat([s + depth for s in seq_lens])


class FlashAttention(Adapter):
    name = "fa3"
    module = "sglang.srt.layers.attention.flashattention_backend"
    backend_class = BACKEND_CLASS

    def era(self, module: ModuleType) -> Era:
        return detect_era(module)

    def supports(self, module: ModuleType, era: Era, shape: Shape) -> Support:
        if shape.mode is Mode.DRAFT_DECODE and not isinstance(getattr(module, MULTI_STEP_CLASS, None), type):
            return Support.no(f"no draft decode: the module has no {MULTI_STEP_CLASS}")
        if shape.mode is Mode.DRAFT_EXTEND and "draft_extend" not in _class_source(module):
            return Support.no("no draft-extend CUDA graph: the graph metadata paths never mention draft extend")
        if shape.topk > 1 and shape.mode in CASCADE_MODES and CASCADE_RECORD not in _class_source(module):
            return Support.no(f"topk > 1: the backend has no cascade metadata ({CASCADE_RECORD})")
        return YES

    def make(self, module: ModuleType, pool: Pool, shape: Shape) -> Any:
        backend_class = getattr(module, BACKEND_CLASS)
        backend = backend_class.__new__(backend_class)
        for name, value in _attributes(pool, shape).items():
            _set(backend, name, value)
        tokens_per_req = max(shape.tokens_per_req, shape.draft_tokens, shape.topk)
        backend.init_cuda_graph_state(shape.bs, shape.bs * tokens_per_req)
        return backend

    def spec_info(self, module: ModuleType, shape: Shape, batch: Any) -> Any:
        if shape.mode is Mode.TARGET_VERIFY:
            return TreeVerifyInput(shape.tokens_per_req, topk=shape.topk)
        if shape.mode in (Mode.DRAFT_DECODE, Mode.DRAFT_EXTEND):
            return EraDraftInput(shape.topk, shape.tokens_per_req)
        return None

    def bake(self, backend: Any, shape: Shape) -> FlashCalls:
        prefix = FlashCall.of(backend.forward_metadata)
        if shape.topk <= 1 or shape.mode not in CASCADE_MODES:
            return FlashCalls(prefix)
        expand_page = 1 if shape.mode is Mode.TARGET_VERIFY else backend.page_size
        return FlashCalls(prefix, FlashCall.of(getattr(backend, CASCADE_RECORD)), expand_page)

    def read(self, source: FlashCalls, shape: Shape, rows: int, pool: Pool) -> AttentionRead:
        return read_calls(source, rows, pool.page_size, pool.req_to_token.shape[1])


def detect_era(module: ModuleType) -> Era:
    """The era of the revision's ``flashattention_backend`` module, by what its class defines
    and which metadata kernels it launches."""
    backend = getattr(module, BACKEND_CLASS, None)
    if not isinstance(backend, type):
        return Era("?", None, (f"no class {BACKEND_CLASS}",))
    own = set(vars(backend))
    findings = [f"defines {name}" for name in sorted(own & _API_METHODS)]
    findings += [f"calls {name} from {origin}" for name, origin in sorted(_kernel_origins(module).items())]
    if "init_forward_metadata_in_graph" in own:
        return Era("F7", IN_GRAPH, tuple(findings))
    if "init_forward_metadata_out_graph" in own:
        origins = _kernel_origins(module)
        label = "F4"
        if "build_trtllm_mha_page_table" in origins:
            label = "F6" if any(o.startswith("sglang.kernels") for o in origins.values()) else "F5"
        return Era(label, OUT_OF_GRAPH, tuple(findings))
    if {"init_forward_metadata_capture_cuda_graph", "init_forward_metadata_replay_cuda_graph"} <= own:
        if "_bind_metadata_buffers" in own:
            label = "F3"
        else:
            label = "F2" if any(marker in vars(module) for marker in FUSED_DECODE_MARKERS) else "F1"
        return Era(label, CAPTURE_REPLAY, tuple(findings))
    return Era("?", None, tuple(findings) or ("no CUDA-graph metadata entry point",))


_API_METHODS = {
    "init_forward_metadata_capture_cuda_graph",
    "init_forward_metadata_replay_cuda_graph",
    "_bind_metadata_buffers",
    "_apply_cuda_graph_metadata",
    "init_forward_metadata_out_graph",
    "init_forward_metadata_in_graph",
}


def _kernel_origins(module: ModuleType) -> dict[str, str]:
    """Metadata launchers the module holds -> the module that defines them."""
    found = {}
    for name in LAUNCHERS:
        function = vars(module).get(name)
        if function is not None:
            wrapped = getattr(function, "__wrapped__", function)
            found[name] = getattr(wrapped, "__module__", "?") or "?"
    return found


def _class_source(module: ModuleType) -> str:
    backend = getattr(module, BACKEND_CLASS, None)
    try:
        return inspect.getsource(backend) if isinstance(backend, type) else ""
    except (OSError, TypeError):
        return ""


def _attributes(pool: Pool, shape: Shape) -> dict[str, Any]:
    """What the metadata paths of every era read, set as ``__init__`` would for a plain MHA model
    without sliding windows, local attention or an encoder."""
    req_to_token_pool = SimpleNamespace(req_to_token=pool.req_to_token, size=pool.req_to_token.shape[0])
    draft = shape.mode is not Mode.DECODE
    return {
        "device": torch.device("cpu"),
        "max_context_len": MAX_CONTEXT_LEN,
        "page_size": pool.page_size,
        "max_num_pages": -(-MAX_CONTEXT_LEN // pool.page_size),
        "req_to_token": pool.req_to_token,
        "req_to_token_pool": req_to_token_pool,
        "token_to_kv_pool": None,
        "forward_metadata": None,
        "forward_metadata_spec_decode_expand": None,
        "decode_cuda_graph_metadata": {},
        "target_verify_metadata": {},
        "draft_extend_metadata": {},
        "topk": shape.topk if draft else 0,
        "speculative_num_steps": shape.num_steps if shape.mode is Mode.DRAFT_DECODE else 0,
        "speculative_num_draft_tokens": shape.draft_tokens if draft else None,
        "speculative_step_id": shape.step,
        "use_mla": False,
        "skip_prefill": False,
        "is_draft_runner": shape.mode in (Mode.DRAFT_DECODE, Mode.DRAFT_EXTEND),
        "is_encoder_decoder": False,
        "use_sliding_window_kv_pool": False,
        "sliding_window_size": None,
        "has_swa": False,
        "has_local_attention": False,
        "attention_chunk_size": None,
        "is_prefill_aware_swa": False,
        "attn_cp_size": 1,
        "fa_impl_ver": 3,
        "num_splits": 0,
        "kv_cache_dtype": torch.bfloat16,
        "kv_cache_dtype_str": "auto",
        "kv_cache_is_mxfp8": False,
        "_get_scheduler_metadata": None,
        "_disable_scheduler_metadata_precompute": True,
        "fa_skip_kv_cache": False,
        "full_cg_prefill_metadata": None,
        "cuda_graph_custom_mask": None,
    }


def _set(target: Any, name: str, value: Any) -> None:
    """Set ``name`` unless the class makes it read-only (a property without a setter)."""
    declared = getattr(type(target), name, None)
    if isinstance(declared, property) and declared.fset is None:
        return
    setattr(target, name, value)


ADAPTER = FlashAttention()
