"""The text of an SGLang-shaped ``flashattention_backend.py`` for one :class:`Variant`.

Same module path, classes, method names, signatures and attributes as the real file in its era,
with small bodies of real torch code; each planted bug is one changed expression.
"""

from __future__ import annotations

from string import Template
from textwrap import dedent, indent

from .cascade import cascade_hooks, cascade_methods
from .variant import Bug, Variant

HEADER = '''\
"""FlashAttention backend: metadata for flash_attn_with_kvcache, eager and under CUDA graphs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import triton
import triton.language as tl

from sglang.srt.layers.attention.base_attn_backend import AttentionBackend
from sglang.srt.model_executor.forward_batch_info import ForwardBatch, ForwardMode
from sgl_kernel.flash_attn import flash_attn_with_kvcache


@dataclass
class FlashAttentionMetadata:
    cache_seqlens_int32: torch.Tensor = None
    max_seq_len_q: int = 1
    max_seq_len_k: int = 0
    cu_seqlens_q: torch.Tensor = None
    cu_seqlens_k: torch.Tensor = None
    page_table: torch.Tensor = None
'''

INIT = """
def __init__(self, model_runner, skip_prefill=False, speculative_step_id=0, topk=0, speculative_num_steps=0):
    super().__init__()
    self.forward_metadata: FlashAttentionMetadata = None
    self.max_context_len = model_runner.model_config.context_len
    self.device = model_runner.device
    self.req_to_token_pool = model_runner.req_to_token_pool
    self.req_to_token = model_runner.req_to_token_pool.req_to_token
    self.page_size = model_runner.page_size
    self.max_num_pages = (self.max_context_len + self.page_size - 1) // self.page_size
    self.topk = model_runner.server_args.speculative_eagle_topk or 0
    self.speculative_num_steps = speculative_num_steps
    self.speculative_num_draft_tokens = model_runner.server_args.speculative_num_draft_tokens
    self.speculative_step_id = speculative_step_id
    self.decode_cuda_graph_metadata = {}
    self.target_verify_metadata = {}
"""

EAGER = """
def init_forward_metadata(self, forward_batch: ForwardBatch):
${cascade_eager}    metadata = FlashAttentionMetadata()
    seq_lens = forward_batch.seq_lens
    bs = forward_batch.batch_size
    max_k = ${host_max}
    mode = forward_batch.forward_mode
    if mode.is_decode_or_idle():
        delta = 0 if forward_batch.spec_info is None else self.speculative_step_id + 1
        metadata.cache_seqlens_int32 = (seq_lens + delta).to(torch.int32)
        metadata.max_seq_len_k = max_k + delta
        metadata.cu_seqlens_q = torch.arange(0, bs + 1, dtype=torch.int32)
    elif mode.is_target_verify():
        width = self._verify_width(forward_batch.spec_info)
        metadata.cache_seqlens_int32 = (seq_lens + width).to(torch.int32)
        metadata.max_seq_len_q = width
        metadata.max_seq_len_k = max_k + width
        metadata.cu_seqlens_q = torch.arange(0, bs * width + 1, width, dtype=torch.int32)
    else:
        metadata.cache_seqlens_int32 = seq_lens.to(torch.int32)
        metadata.max_seq_len_q = max(forward_batch.extend_seq_lens_cpu)
        metadata.max_seq_len_k = max_k
        metadata.cu_seqlens_q = torch.nn.functional.pad(
            torch.cumsum(forward_batch.extend_seq_lens, dim=0, dtype=torch.int32), (1, 0)
        )
    metadata.cu_seqlens_k = torch.nn.functional.pad(
        torch.cumsum(metadata.cache_seqlens_int32, dim=0, dtype=torch.int32), (1, 0)
    )
    page_table = self.req_to_token_pool.req_to_token[forward_batch.req_pool_indices, : metadata.max_seq_len_k]
    if self.page_size > 1:
        strided = torch.arange(0, page_table.shape[1], self.page_size)
        page_table = page_table[:, strided] // self.page_size
    metadata.page_table = page_table
    self.forward_metadata = metadata

def _verify_width(self, spec_info):
    return ${verify_width}
"""

STATE = """
def init_cuda_graph_state(self, max_bs: int, max_num_tokens: int):
    pages = self.max_num_pages

    def buffers(cu_seqlens_q):
        return {
            "cache_seqlens": torch.zeros(max_bs, dtype=torch.int32, device=self.device),
            "cu_seqlens_q": cu_seqlens_q,
            "cu_seqlens_k": torch.zeros(max_bs + 1, dtype=torch.int32, device=self.device),
            "page_table": torch.zeros(max_bs, pages, dtype=torch.int32, device=self.device),
            "strided_indices": torch.arange(0, self.max_context_len, self.page_size, device=self.device),
        }

    self.decode_cuda_graph_metadata = buffers(torch.arange(0, max_bs + 1, dtype=torch.int32))
    self.decode_cuda_graph_metadata["page_table_draft_decode"] = torch.zeros(max_bs, pages, dtype=torch.int32)
    self.target_verify_metadata = buffers(torch.zeros(max_bs + 1, dtype=torch.int32))
${extend_state}${cascade_state}
def get_cuda_graph_seq_len_fill_value(self):
    return 1
"""

BIND = """
def ${bind_name}(self, bs: int, num_tokens: int, req_pool_indices, seq_lens, encoder_lens, forward_mode, spec_info):
${cascade_bind}    metadata = FlashAttentionMetadata()
    if forward_mode.is_decode_or_idle():
        buffers = self.decode_cuda_graph_metadata
        if spec_info is None:
            metadata.cu_seqlens_q = buffers["cu_seqlens_q"][${decode_cu_q}]
            metadata.page_table = buffers["page_table"][:bs, :]
        else:
            metadata.cu_seqlens_q = buffers["cu_seqlens_q"][: bs + 1]
            metadata.max_seq_len_q = ${draft_q}
            metadata.page_table = buffers["page_table_draft_decode"][:bs, :]
        metadata.cache_seqlens_int32 = buffers["cache_seqlens"][:bs]
    elif forward_mode.is_target_verify():
        buffers = self.target_verify_metadata
        width = self._verify_width(spec_info)
        metadata.cache_seqlens_int32 = buffers["cache_seqlens"][:bs]
        metadata.max_seq_len_q = ${verify_q}
        metadata.cu_seqlens_q = torch.arange(0, bs * width + 1, width, dtype=torch.int32)
        metadata.page_table = buffers["page_table"][:bs, :]
${extend_bind}    metadata.cu_seqlens_k = buffers["cu_seqlens_k"][: bs + 1]
    buffers[bs] = metadata
    self.forward_metadata = metadata
"""

APPLY = """
def ${apply_name}(
    self, bs, req_pool_indices, seq_lens, seq_lens_sum, encoder_lens, forward_mode, spec_info, seq_lens_cpu,
    out_cache_loc=None,
):
    seq_lens = seq_lens[:bs]
    req_pool_indices = req_pool_indices[:bs]
${cascade_apply}    if forward_mode.is_decode_or_idle():
        buffers = self.decode_cuda_graph_metadata
        metadata = buffers[bs]
        delta = 0 if spec_info is None else ${draft_delta}
        pages = ${decode_pages} if spec_info is None else ${draft_pages}
        normal_decode_set_metadata(
            metadata.cache_seqlens_int32, metadata.cu_seqlens_k, metadata.page_table, self.req_to_token,
            req_pool_indices, buffers["strided_indices"], pages, seq_lens, delta, self.page_size,
        )
    elif forward_mode.is_target_verify():
        buffers = self.target_verify_metadata
        metadata = buffers[bs]
        metadata.cache_seqlens_int32.copy_(seq_lens + ${verify_kv})
        self._copy_pages(metadata, buffers, req_pool_indices, ${verify_pages})
${extend_apply}    metadata.cu_seqlens_k[1:].copy_(torch.cumsum(metadata.cache_seqlens_int32, dim=0, dtype=torch.int32))
    self.forward_metadata = metadata

def _copy_pages(self, metadata, buffers, req_pool_indices, pages):
    strided = buffers["strided_indices"][:pages]
    page_indices = self.req_to_token[req_pool_indices[:, None], strided[None, :]]
    metadata.page_table[:, :pages].copy_(page_indices // self.page_size)
"""

EXTEND_BIND = """\
    elif forward_mode.is_draft_extend(include_v2=True):
        buffers = self.draft_extend_metadata
        metadata.cache_seqlens_int32 = buffers["cache_seqlens"][:bs]
        metadata.max_seq_len_q = ${extend_q}
        metadata.cu_seqlens_q = ${extend_cu_q}
        metadata.page_table = buffers["page_table"][:bs, :]
"""

EXTEND_APPLY = """\
    elif forward_mode.is_draft_extend(include_v2=True):
        buffers = self.draft_extend_metadata
        metadata = buffers[bs]
        extend_seq_lens = torch.full((bs,), spec_info.num_tokens_per_req, dtype=torch.int32)
        metadata.cache_seqlens_int32.copy_(${extend_kv})
${extend_cu_q_copy}        self._copy_pages(metadata, buffers, req_pool_indices, ${extend_pages})
"""

EXTEND_STATE = """\
    self.draft_extend_metadata = buffers(torch.zeros(max_bs + 1, dtype=torch.int32))
"""

STRIDED_CU_Q = "torch.arange(0, num_tokens + 1, num_tokens // bs, dtype=torch.int32)"
"""Before the out-of-graph API, draft extend baked a strided ``cu_seqlens_q`` at capture."""

CU_Q_COPY = """\
        metadata.cu_seqlens_q[1:].copy_(torch.cumsum(extend_seq_lens, dim=0, dtype=torch.int32))
"""

NO_MODE = """\
    else:
        raise ValueError(f"no CUDA graph for {forward_mode}")
"""

OUT_GRAPH = """
def init_forward_metadata_out_graph(self, forward_batch: ForwardBatch, in_capture: bool = False):
    bs = forward_batch.batch_size
    if in_capture:
        self._bind_metadata_buffers(
            bs, forward_batch.positions.numel(), forward_batch.req_pool_indices, forward_batch.seq_lens,
            forward_batch.encoder_lens, forward_batch.forward_mode, forward_batch.spec_info,
        )
    self._apply_cuda_graph_metadata(
        bs, forward_batch.req_pool_indices, forward_batch.seq_lens, None, forward_batch.encoder_lens,
        forward_batch.forward_mode, forward_batch.spec_info, None, getattr(forward_batch, "out_cache_loc", None),
    )
"""

FORWARD = """
def forward_decode(self, q, k, v, layer, forward_batch: ForwardBatch, save_kv_cache=True):
    metadata = self.forward_metadata
    key_cache, value_cache = forward_batch.token_to_kv_pool.get_kv_buffer(layer.layer_id)
    return flash_attn_with_kvcache(
        q=q, k_cache=key_cache, v_cache=value_cache, page_table=metadata.page_table,
        cache_seqlens=metadata.cache_seqlens_int32, cu_seqlens_q=metadata.cu_seqlens_q,
        cu_seqlens_k_new=metadata.cu_seqlens_k, max_seqlen_q=metadata.max_seq_len_q,
        softmax_scale=layer.scaling, causal=True,
    )

forward_extend = forward_decode
"""

MULTI_STEP = """

class FlashAttentionMultiStepBackend:
    def __init__(self, model_runner, topk: int, speculative_num_steps: int):
        self.topk = topk
        self.speculative_num_steps = speculative_num_steps
        self.attn_backends = [
            FlashAttentionBackend(
                model_runner, speculative_step_id=i, topk=topk, speculative_num_steps=speculative_num_steps
            )
            for i in range(speculative_num_steps - 1)
        ]

    def init_cuda_graph_state(self, max_bs: int, max_num_tokens: int):
        for backend in self.attn_backends:
            backend.init_cuda_graph_state(max_bs, max_num_tokens)
"""

TORCH_KERNEL = """

def normal_decode_set_metadata(
    cache_seqlens_int32, cu_seqlens_k, page_table, req_to_token, req_pool_indices, strided_indices,
    max_seq_pages, seq_lens, seq_len_delta, page_size,
):
    cache_seqlens_int32.copy_(seq_lens + seq_len_delta)
    cu_seqlens_k[1:].copy_(torch.cumsum(cache_seqlens_int32, dim=0, dtype=torch.int32))
    page_indices = req_to_token[req_pool_indices[:, None], strided_indices[:max_seq_pages][None, :]]
    page_table[:, :max_seq_pages].copy_(page_indices // page_size)
"""

TRITON_KERNEL = """

@triton.jit
def _fused_metadata_kernel_general(seq_lens, req_to_token, req_pool_indices, cache_seqlens_int32, cu_seqlens_k,
                                   page_table, B, max_seq_pages, page_size: tl.constexpr, seq_len_delta: tl.constexpr):
    pid_b = tl.program_id(0)
    if pid_b == 0:
        acc = 0
        for idx in range(B):
            val = (tl.load(seq_lens + idx) + seq_len_delta).to(tl.int32)
            tl.store(cache_seqlens_int32 + idx, val)
            tl.store(cu_seqlens_k + idx, acc)
            acc += val
        tl.store(cu_seqlens_k + B, acc)


def normal_decode_set_metadata(
    cache_seqlens_int32, cu_seqlens_k, page_table, req_to_token, req_pool_indices, strided_indices,
    max_seq_pages, seq_lens, seq_len_delta, page_size, swa_page_table=None, token_to_kv_pool=None,
):
    batch_size = cache_seqlens_int32.shape[0]
    _fused_metadata_kernel_general[(batch_size, triton.cdiv(max_seq_pages, 128))](
        seq_lens, req_to_token, req_pool_indices, cache_seqlens_int32, cu_seqlens_k, page_table,
        batch_size, max_seq_pages, page_size, seq_len_delta,
    )
"""


def _method(text: str, **values: str) -> str:
    return indent(Template(dedent(text)).substitute(values), "    ")


def _pages(length: str, floor: bool) -> str:
    return f"{length} // self.page_size" if floor else f"({length} + self.page_size - 1) // self.page_size"


def backend_text(v: Variant) -> str:
    """The module's text for ``v``."""
    out_graph, extend = v.era == "F4", v.era != "F0"
    hooks = cascade_hooks(v)
    body = [
        _method(INIT),
        _method(
            EAGER,
            host_max="self.max_context_len" if out_graph else "forward_batch.seq_lens_cpu.max().item()",
            verify_width="spec_info.num_tokens_per_req" if v.decoupled else "self.speculative_num_draft_tokens",
            cascade_eager=hooks["cascade_eager"],
        ),
        _method(STATE, extend_state=EXTEND_STATE if extend else "", cascade_state=hooks["cascade_state"]),
        _method(
            BIND,
            bind_name="_bind_metadata_buffers" if out_graph else "init_forward_metadata_capture_cuda_graph",
            decode_cu_q=":bs" if v.has(Bug.DECODE_CAPTURE) else ": bs + 1",
            draft_q="self.speculative_step_id" if v.has(Bug.DRAFT_DECODE_CAPTURE) else "1",
            verify_q="1" if v.has(Bug.VERIFY_CAPTURE) else "width",
            extend_bind=Template(EXTEND_BIND).substitute(
                extend_q="1" if v.has(Bug.DRAFT_EXTEND_CAPTURE) else "num_tokens // bs",
                extend_cu_q='buffers["cu_seqlens_q"][: bs + 1]' if out_graph else STRIDED_CU_Q,
            )
            if extend
            else NO_MODE,
            cascade_bind=hooks["cascade_bind"],
        ),
        _method(APPLY, **_apply_values(v, out_graph, extend), cascade_apply=hooks["cascade_apply"]),
    ]
    if extend:
        body.append(cascade_methods(v))
    if out_graph:
        body.append(_method(OUT_GRAPH))
    body.append(_method(FORWARD))
    head = "\n\nclass FlashAttentionBackend(AttentionBackend):\n"
    if out_graph:
        head += "    needs_cpu_seq_lens: bool = False\n"
    text = HEADER + head + "\n".join(body)
    if extend:
        text += MULTI_STEP
    return text + (TRITON_KERNEL if out_graph else TORCH_KERNEL)


def _apply_values(v: Variant, out_graph: bool, extend: bool) -> dict[str, str]:
    """The replay body's switches: page counts static (F4) or from the host copy (F1), and bugs."""
    host, static, width = "seq_lens_cpu.max().item()", "self.max_num_pages", "self._verify_width(spec_info)"
    verify_kv = "self.speculative_num_draft_tokens - 1" if v.has(Bug.VERIFY_REPLAY) else width
    if v.has(Bug.VERIFY_T_NE_N):
        verify_kv = "self.speculative_num_draft_tokens"
    wrong_pages = v.has(Bug.DECODE_REPLAY)
    if out_graph:
        decode_pages = f"{static} // self.page_size" if wrong_pages else static
        draft_pages = verify_pages = extend_pages = static
    else:
        decode_pages = _pages(host, floor=wrong_pages)
        draft_pages = _pages(f"{host} + delta", floor=False)
        verify_pages, extend_pages = _pages(f"{host} + {width}", floor=False), _pages(host, floor=False)
    extend_kv = "seq_lens + extend_seq_lens" if v.has(Bug.DRAFT_EXTEND_REPLAY) else "seq_lens"
    return dict(
        apply_name="_apply_cuda_graph_metadata" if out_graph else "init_forward_metadata_replay_cuda_graph",
        draft_delta="self.speculative_step_id" if v.has(Bug.DRAFT_DECODE_REPLAY) else "self.speculative_step_id + 1",
        decode_pages=decode_pages,
        draft_pages=draft_pages,
        verify_kv=verify_kv,
        verify_pages=verify_pages,
        extend_apply=Template(EXTEND_APPLY).substitute(
            extend_kv=extend_kv, extend_pages=extend_pages, extend_cu_q_copy=CU_Q_COPY if out_graph else ""
        )
        if extend
        else NO_MODE,
    )
