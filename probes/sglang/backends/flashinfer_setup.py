"""A revision's FlashInfer backend made on the CPU, and the runner-side glue one mode needs.

The backend (``FlashInferAttnBackend``) and its indices updaters are made with ``__new__`` and
the attributes their metadata paths read (their ``__init__`` reads a model runner, a server
config and the parallel state); the multi-step draft backend the same way, over one sub-backend
per speculative step. FlashInfer's wrappers are the stand-ins of ``probes.sglang.kernels_flashinfer``;
the triton metadata kernels are the CPU versions the loader put in place. The revision allocates
its buffers on ``"cuda"``: its calls run under :class:`CudaIsCpu`, which makes such tensors on
the CPU.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Callable
from types import ModuleType, SimpleNamespace
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from probes.sglang import kernels_flashinfer
from probes.sglang.backends.base import Mode, Shape
from probes.sglang.fixture import MAX_CONTEXT_LEN, Pool, _set

BACKEND_CLASS = "FlashInferAttnBackend"
MULTI_STEP_CLASS = "FlashInferMultiStepDraftBackend"
SPEC_UTILS = "sglang.srt.speculative.spec_utils"
DRAFT_KERNEL = "generate_draft_decode_kv_indices"
HEADS, KV_HEADS, HEAD_DIM = 8, 2, 64


class CudaIsCpu(TorchFunctionMode):
    """Tensors a revision asks for on ``"cuda"`` are made on the CPU."""

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = dict(kwargs or {})
        device = kwargs.get("device")
        if device is not None and torch.device(device).type == "cuda":
            kwargs["device"] = "cpu"
        return func(*args, **kwargs)


def on_cpu(function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def run(*args: Any, **kwargs: Any) -> Any:
        with CudaIsCpu():
            return function(*args, **kwargs)

    return run


def draft_kernel(module: ModuleType) -> Any:
    """The revision's ``generate_draft_decode_kv_indices`` (its CPU version, put in place as the
    defining module loaded): a global of the backend module, or of ``spec_utils`` where the
    multi-step backend imports it inside ``__init__``."""
    found = vars(module).get(DRAFT_KERNEL)
    if found is None:
        found = getattr(importlib.import_module(SPEC_UTILS), DRAFT_KERNEL)
    return found


def make_backend(
    module: ModuleType, pool: Pool, max_bs: int, *, draft_tokens: int = 0, skip_prefill: bool = False, **buffers: Any
) -> Any:
    """The revision's ``FlashInferAttnBackend`` (one wrapper set, full attention), configured for
    ``draft_tokens`` (N) draft tokens."""
    cls = getattr(module, BACKEND_CLASS)
    backend = cls.__new__(cls)
    kv_indptr = buffers.get("kv_indptr", torch.zeros(max_bs + 1, dtype=torch.int32))
    last_page_len = buffers.get("kv_last_page_len", torch.ones(max_bs, dtype=torch.int32))
    wrappers = kernels_flashinfer
    attributes: dict[str, Any] = {
        "device": torch.device("cpu"),
        "req_to_token_pool": SimpleNamespace(req_to_token=pool.req_to_token, size=pool.req_to_token.shape[0]),
        "token_to_kv_pool": None,
        "_swa_kv_pool": None,
        "use_sliding_window_kv_pool": False,
        "enable_mis": False,
        "dllm_config": None,
        "is_dllm_model": False,
        "prefill_backend": "fa2",
        "decode_backend": "fa2",
        "prefill_uses_dequant_workspace": False,
        "decode_uses_dequant_workspace": False,
        "dq_page_table": None,
        "dq_paged_kernel_lens": None,
        "flashinfer_kv_cache_dtype": torch.bfloat16,
        "kv_cache_dtype": torch.bfloat16,
        "decode_use_tensor_cores": False,
        "max_context_len": MAX_CONTEXT_LEN,
        "page_size": pool.page_size,
        "skip_prefill": skip_prefill,
        "is_multimodal": False,
        "num_wrappers": 1,
        "dispatch_reason": None,
        "enable_deterministic": False,
        "prefill_split_tile_size": None,
        "decode_split_tile_size": None,
        "disable_cuda_graph_kv_split": False,
        "use_paged": True,
        "speculative_num_draft_tokens": draft_tokens,
        "workspace_buffer": torch.zeros(8, dtype=torch.uint8),
        "kv_indptr": [kv_indptr],
        "kv_last_page_len": last_page_len,
        "qo_indptr": [torch.zeros(max_bs + 1, dtype=torch.int32)],
        "prefill_wrapper_ragged": wrappers.BatchPrefillWithRaggedKVCacheWrapper(),
        "prefill_wrappers_paged": [wrappers.BatchPrefillWithPagedKVCacheWrapper()],
        "prefill_wrappers_verify": [wrappers.BatchPrefillWithPagedKVCacheWrapper()],
        "decode_wrappers": [wrappers.BatchDecodeWithPagedKVCacheWrapper()],
        "forward_metadata": None,
        "decode_cuda_graph_metadata": {},
        "prefill_cuda_graph_metadata": {},
        "draft_extend_cuda_graph_metadata": {},
        "full_cg_prefill_wrappers": None,
    }
    for name, value in attributes.items():
        _set(backend, name, value)
    backend.indices_updater_decode = _updater(module, "FlashInferIndicesUpdaterDecode", backend)
    if not skip_prefill:
        backend.indices_updater_prefill = _updater(module, "FlashInferIndicesUpdaterPrefill", backend)
    for name in ("init_forward_metadata", "init_cuda_graph_state", *GRAPH_METHODS):
        if hasattr(backend, name):
            setattr(backend, name, on_cpu(getattr(backend, name)))
    return backend


GRAPH_METHODS = (
    "init_forward_metadata_capture_cuda_graph",
    "init_forward_metadata_replay_cuda_graph",
    "init_forward_metadata_out_graph",
    "init_forward_metadata_in_graph",
)


def _updater(module: ModuleType, class_name: str, backend: Any) -> Any:
    cls = getattr(module, class_name)
    updater = cls.__new__(cls)
    attributes = {
        "num_qo_heads": HEADS,
        "num_kv_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "data_type": torch.bfloat16,
        "q_data_type": torch.bfloat16,
        "sliding_window_size": None,
        "attn_backend": backend,
        "kv_indptr": backend.kv_indptr,
        "kv_last_page_len": backend.kv_last_page_len,
        "qo_indptr": getattr(backend, "qo_indptr", None),
        "req_to_token": backend.req_to_token_pool.req_to_token,
        "_swa_kv_pool": None,
        "token_to_kv_pool_allocator": None,
        "prefill_wrapper_ragged": backend.prefill_wrapper_ragged,
        "page_size": backend.page_size,
        "decode_wrappers": backend.decode_wrappers,
    }
    for name, value in attributes.items():
        _set(updater, name, value)
    updater.update = updater.update_single_wrapper
    return updater


def make_multi_step(module: ModuleType, pool: Pool, shape: Shape) -> Any:
    """The revision's multi-step draft backend: ``num_steps - 1`` sub-backends over shared
    indptr rows, CUDA-graph state for ``shape.bs`` sequences of ``shape.topk`` branches."""
    cls = getattr(module, MULTI_STEP_CLASS)
    multi = cls.__new__(cls)
    max_bs = shape.bs * shape.topk
    multi.topk, multi.speculative_num_steps, multi.page_size = shape.topk, shape.num_steps, pool.page_size
    multi.kv_indptr = torch.zeros(shape.num_steps, max_bs + 1, dtype=torch.int32)
    multi.kv_last_page_len = torch.ones(max_bs, dtype=torch.int32)
    multi.generate_draft_decode_kv_indices = draft_kernel(module)
    multi.attn_backends = [
        make_backend(
            module,
            pool,
            max_bs,
            skip_prefill=True,
            kv_indptr=multi.kv_indptr[i],
            kv_last_page_len=multi.kv_last_page_len,
        )
        for i in range(shape.num_steps - 1)
    ]
    multi.max_context_len = MAX_CONTEXT_LEN
    multi.pool_len = pool.req_to_token.shape[1]
    multi.req_to_token_pool = SimpleNamespace(req_to_token=pool.req_to_token)
    on_cpu(multi.init_cuda_graph_state)(shape.bs, shape.bs * shape.topk)
    return multi


def dataclass_instance(cls: type, **values: Any) -> Any:
    """An instance of the revision's spec-info dataclass ``cls`` with ``values`` set, every other
    field at its default (or None), and its ``__post_init__`` run."""
    instance = cls.__new__(cls)
    for spec in dataclasses.fields(cls):
        if spec.default is not dataclasses.MISSING:
            value = spec.default
        elif spec.default_factory is not dataclasses.MISSING:
            value = spec.default_factory()
        else:
            value = None
        object.__setattr__(instance, spec.name, value)
    for name, value in values.items():
        object.__setattr__(instance, name, value)
    post_init = getattr(instance, "__post_init__", None)
    if post_init is not None:
        post_init()
    for name, value in values.items():
        object.__setattr__(instance, name, value)
    return instance


def eager_extras(shape: Shape, forward_batch: Any) -> dict[str, Any]:
    """ForwardBatch fields a mode's eager path reads that a plain batch lacks: a draft extend's
    prefix and extension lengths; a draft decode's positions (each branch's ``seq_len``)."""
    seq_lens = forward_batch.seq_lens
    extras: dict[str, Any] = {"cross_attention_custom_mask": None}
    if shape.mode is Mode.DRAFT_EXTEND:
        prefix = seq_lens - shape.tokens_per_req
        extras.update(
            extend_prefix_lens=prefix,
            extend_prefix_lens_cpu=prefix.tolist(),
            extend_seq_lens=torch.full_like(seq_lens, shape.tokens_per_req),
            extend_seq_lens_cpu=[shape.tokens_per_req] * len(seq_lens),
            extend_num_tokens=shape.tokens_per_req * len(seq_lens),
        )
    if shape.mode is Mode.DRAFT_DECODE:
        extras["positions"] = seq_lens.long().repeat_interleave(shape.topk)
    return extras
