"""A small paged-KV attention backend whose metadata design mirrors SGLang's TRTLLM MHA backend.

Forward modes decode, target verify and draft extend; an eager metadata path; CUDA-graph state per
batch size with build (capture) and apply (capture and replay) steps; a sliding-window page table.
Kernels: FlashInfer XQA / paged prefill (fa2, fa3) on CUDA, plain torch elsewhere.
"""

from .attention_backend import PagedAttentionBackend
from .config import BackendConfig
from .forward_mode import ForwardMode
from .graph_runner import GraphRunner
from .kv_pool import PagedKVPool
from .metadata import ForwardBatch, ForwardMetadata

__all__ = [
    "BackendConfig",
    "ForwardBatch",
    "ForwardMetadata",
    "ForwardMode",
    "GraphRunner",
    "PagedAttentionBackend",
    "PagedKVPool",
]
