"""The text of an SGLang-shaped ``triton_backend.py`` (and the draft kernel's module) for one
:class:`Variant`.

Same module paths, classes, method names, signatures and attributes as the real file in its era,
with small bodies of real torch code around the triton kernel launches; each planted bug is one
changed expression.
"""

from __future__ import annotations

from string import Template

from .drafts import MULTI_CAPTURE_REPLAY, MULTI_OUT_OF_GRAPH, MULTI_STEP, SPEC_UTILS
from .variant import Bug, Variant

HEADER = '''\
"""Triton attention backend: metadata for the triton decode and extend kernels, eager and under CUDA graphs."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import List, Optional

import torch
import triton

from sglang.srt.layers.attention.base_attn_backend import AttentionBackend
from sglang.srt.layers.attention.utils import create_flashinfer_kv_indices_triton
from sglang.srt.model_executor.forward_batch_info import ForwardBatch, ForwardMode
$draft_import

def next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


@dataclass
class ForwardMetadata:
    attn_logits: torch.Tensor
    attn_lse: torch.Tensor
    max_extend_len: int
    num_kv_splits: torch.Tensor
    kv_indptr: torch.Tensor
    kv_indices: torch.Tensor
    qo_indptr: torch.Tensor
    custom_mask: torch.Tensor
    mask_indptr: torch.Tensor
'''

COMMON = """

class TritonAttnBackend(AttentionBackend):
$class_attrs    def __init__(
        self, model_runner, skip_prefill: bool = False, kv_indptr_buf: Optional[torch.Tensor] = None
    ):
        super().__init__()
        args = model_runner.server_args
        max_bs = model_runner.req_to_token_pool.size
        self.device = model_runner.device
        self.req_to_token_pool = model_runner.req_to_token_pool
        self.req_to_token = model_runner.req_to_token_pool.req_to_token
        self.page_size = model_runner.page_size
        self.skip_prefill = skip_prefill
        self.num_draft_tokens = args.speculative_num_draft_tokens
        self.speculative_num_steps = args.speculative_num_steps
        self.topk = args.speculative_eagle_topk or 0
        self.num_head = model_runner.model_config.num_attention_heads
        self.v_head_dim = model_runner.model_config.v_head_dim
        self.max_context_len = model_runner.model_config.context_len
        self.max_kv_splits = args.triton_attention_num_kv_splits
        if kv_indptr_buf is None:
            kv_indptr_buf = torch.zeros((max_bs + 1,), dtype=torch.int32, device=self.device)
        self.kv_indptr = kv_indptr_buf
        if not skip_prefill:
            self.qo_indptr = torch.zeros((max_bs + 1,), dtype=torch.int64, device=self.device)
            self.mask_indptr = torch.zeros((max_bs + 1,), dtype=torch.int64, device=self.device)
        self.cuda_graph_custom_mask = None
        self.forward_metadata: ForwardMetadata = None

    def get_num_kv_splits(self, num_kv_splits: torch.Tensor, seq_lens: torch.Tensor):
        num_kv_splits.fill_(self.max_kv_splits)

    def _fill_kv_indptr_and_indices(self, bs, lens, req_pool_indices, kv_indices):
        kv_indptr = self.kv_indptr[: bs + 1]
        kv_indptr[1:] = torch.cumsum(lens[:bs], dim=0)
        create_flashinfer_kv_indices_triton[(bs,)](
            self.req_to_token, req_pool_indices, lens, kv_indptr, None, kv_indices, self.req_to_token.stride(0)
        )
        return kv_indptr

    def _kv_indices_len(self, forward_batch: ForwardBatch) -> int:
        # Without a host seq_lens_sum (gpu_only batches) over-allocate: the write is ragged.
        if forward_batch.seq_lens_sum is None:
            return forward_batch.batch_size * self.max_context_len
        return forward_batch.seq_lens_sum

    def init_forward_metadata(self, forward_batch: ForwardBatch):
        bs = forward_batch.batch_size
        spec_info = forward_batch.spec_info
        mode = forward_batch.forward_mode
        attn_logits = attn_lse = num_kv_splits = qo_indptr = custom_mask = mask_indptr = max_extend_len = None
        if mode.is_decode_or_idle():
            if spec_info is None:
                kv_indices = torch.empty(self._kv_indices_len(forward_batch), dtype=torch.int64, device=self.device)
                kv_indptr = self._fill_kv_indptr_and_indices(
                    bs, forward_batch.seq_lens, forward_batch.req_pool_indices, kv_indices
                )
            else:
                kv_indptr, kv_indices = spec_info.kv_indptr, spec_info.kv_indices
                bs = kv_indptr.shape[0] - 1
            attn_logits = torch.empty(
                (bs, self.num_head, self.max_kv_splits, self.v_head_dim), dtype=torch.float32, device=self.device
            )
            attn_lse = torch.empty((bs, self.num_head, self.max_kv_splits), dtype=torch.float32, device=self.device)
            num_kv_splits = torch.empty((bs,), dtype=torch.int32, device=self.device)
            self.get_num_kv_splits(num_kv_splits, forward_batch.seq_lens)
        elif mode.is_target_verify():
            width = $eager_width
            qo_indptr = torch.arange(0, (bs + 1) * width, step=width, dtype=torch.int64, device=self.device)
            kv_indices = torch.empty(self._kv_indices_len(forward_batch), dtype=torch.int64, device=self.device)
            kv_indptr = self._fill_kv_indptr_and_indices(
                bs, forward_batch.seq_lens, forward_batch.req_pool_indices, kv_indices
            )
            custom_mask = spec_info.custom_mask
            mask_indptr = self.mask_indptr[: bs + 1]
            mask_indptr[1:] = torch.cumsum(width * (forward_batch.seq_lens + width), dim=0)
            max_extend_len = width
        else:
            kv_indices = torch.empty(sum(forward_batch.extend_prefix_lens_cpu), dtype=torch.int64, device=self.device)
            kv_indptr = self._fill_kv_indptr_and_indices(
                bs, forward_batch.extend_prefix_lens, forward_batch.req_pool_indices, kv_indices
            )
            qo_indptr = self.qo_indptr[: bs + 1]
            qo_indptr[1:] = torch.cumsum(forward_batch.extend_seq_lens, dim=0)
            max_extend_len = max(forward_batch.extend_seq_lens_cpu)
        self.forward_metadata = ForwardMetadata(
            attn_logits, attn_lse, max_extend_len, num_kv_splits,
            kv_indptr, kv_indices, qo_indptr, custom_mask, mask_indptr,
        )

    def init_cuda_graph_state(
        self, max_bs: int, max_num_tokens: int, kv_indices_buf=None, cuda_graph_num_kv_splits_buf=None
    ):
        splits = (max_num_tokens, self.num_head, self.max_kv_splits)
        self.cuda_graph_attn_logits = torch.zeros((*splits, self.v_head_dim), dtype=torch.float32, device=self.device)
        self.cuda_graph_attn_lse = torch.zeros(splits, dtype=torch.float32, device=self.device)
        if cuda_graph_num_kv_splits_buf is None:
            cuda_graph_num_kv_splits_buf = torch.full(
                (max_num_tokens,), self.max_kv_splits, dtype=torch.int32, device=self.device
            )
        self.cuda_graph_num_kv_splits = cuda_graph_num_kv_splits_buf
        if kv_indices_buf is None:
            kv_indices_buf = torch.zeros(max_num_tokens * self.max_context_len, dtype=torch.int64, device=self.device)
        self.cuda_graph_kv_indices = kv_indices_buf
        if not self.skip_prefill:
            self.cuda_graph_custom_mask = torch.zeros(
                max_num_tokens * self.max_context_len, dtype=torch.uint8, device=self.device
            )

    def _update_target_verify_buffers(self, bs, width, req_pool_indices, seq_lens, spec_info, extra):
        qo_indptr = self.qo_indptr[: bs + 1]
        qo_indptr[:] = torch.arange(0, (bs + 1) * width, step=width, dtype=torch.int64, device=self.device)
        self._fill_kv_indptr_and_indices(bs, seq_lens + extra, req_pool_indices, self.cuda_graph_kv_indices)
        self.cuda_graph_custom_mask[: spec_info.custom_mask.shape[0]] = spec_info.custom_mask
        mask_indptr = self.mask_indptr[: bs + 1]
        mask_indptr[1:] = torch.cumsum(width * (seq_lens[:bs] + width), dim=0)

    def get_cuda_graph_seq_len_fill_value(self):
        return 1
"""

DRAFT_EXTEND_HELPER = """
    def _draft_extend_width(self):
        return $de_width

    def _update_draft_extend_buffers(self, bs, req_pool_indices, seq_lens, spec_info, prefix_only):
        width = self._draft_extend_width()
        qo_indptr = self.qo_indptr[: bs + 1]
        qo_indptr[:] = torch.arange(0, bs * width + 1, step=width, dtype=torch.int64, device=self.device)
        kv_lens = seq_lens[:bs] - spec_info.extend_seq_lens_tensor[:bs] if prefix_only else seq_lens[:bs]
        kv_lens = torch.clamp(kv_lens, min=0).to(torch.int32)
        self._fill_kv_indptr_and_indices(bs, kv_lens, req_pool_indices, self.cuda_graph_kv_indices)
"""

CAPTURE_REPLAY = """
    def init_forward_metadata_capture_cuda_graph(
        self, bs, num_tokens, req_pool_indices, seq_lens, encoder_lens, forward_mode, spec_info
    ):
        assert encoder_lens is None, "Not supported"
        attn_logits = attn_lse = num_kv_splits = qo_indptr = custom_mask = mask_indptr = max_extend_len = None
        kv_indices = self.cuda_graph_kv_indices
        if forward_mode.is_decode_or_idle():
            if spec_info is None:
                kv_indptr = self._fill_kv_indptr_and_indices(bs, seq_lens, req_pool_indices, kv_indices)$decode_capture
            else:
                kv_indptr, kv_indices = spec_info.kv_indptr$draft_capture, spec_info.kv_indices
            attn_logits, attn_lse = self.cuda_graph_attn_logits, self.cuda_graph_attn_lse
            num_kv_splits = self.cuda_graph_num_kv_splits
        elif forward_mode.is_target_verify():
            self.cuda_graph_verify_width = $capture_width
            width = self.cuda_graph_verify_width
            self._update_target_verify_buffers(bs, width, req_pool_indices, seq_lens, spec_info, 0)
            kv_indptr, qo_indptr = self.kv_indptr[: bs + 1], self.qo_indptr[: bs + 1]
            custom_mask, mask_indptr = self.cuda_graph_custom_mask, self.mask_indptr[: bs + 1]
            max_extend_len = $verify_capture_len
$capture_draft_extend        else:
            raise ValueError(f"Invalid forward mode: {forward_mode=} for CUDA Graph capture.")
        self.forward_metadata = ForwardMetadata(
            attn_logits, attn_lse, max_extend_len, num_kv_splits,
            kv_indptr, kv_indices, qo_indptr, custom_mask, mask_indptr,
        )

    def init_forward_metadata_replay_cuda_graph(
        self, bs, req_pool_indices, seq_lens, seq_lens_sum, encoder_lens, forward_mode, spec_info, seq_lens_cpu
    ):
        if forward_mode.is_decode_or_idle():
            assert spec_info is None, "Multi-step cuda graph init is not done here."
            self._fill_kv_indptr_and_indices(bs, $decode_replay_lens, req_pool_indices[:bs], self.cuda_graph_kv_indices)
            self.get_num_kv_splits(self.cuda_graph_num_kv_splits[:bs], seq_lens[:bs])
        elif forward_mode.is_target_verify():
            width, extra = $replay_width, $verify_replay_extra
            self._update_target_verify_buffers(bs, width, req_pool_indices, seq_lens, spec_info, extra)
$replay_draft_extend        else:
            raise ValueError(f"Invalid forward mode: {forward_mode=} for CUDA Graph replay.")
"""

CAPTURE_DRAFT_EXTEND = """\
        elif forward_mode.is_draft_extend(include_v2=True):
            self._update_draft_extend_buffers(bs, req_pool_indices, seq_lens, spec_info, True)
            kv_indptr, qo_indptr = self.kv_indptr[: bs + 1], self.qo_indptr[: bs + 1]
            max_extend_len = $de_capture_len
"""

REPLAY_DRAFT_EXTEND = """\
        elif forward_mode.is_draft_extend(include_v2=True):
            self._update_draft_extend_buffers(bs, req_pool_indices, seq_lens, spec_info, $de_replay_prefix)
"""

OUT_OF_GRAPH = """
    def init_forward_metadata_out_graph(self, forward_batch: ForwardBatch, in_capture: bool = False):
        bs = forward_batch.batch_size
        mode, spec_info = forward_batch.forward_mode, forward_batch.spec_info
        if in_capture and mode.is_decode_or_idle() and spec_info is not None:
            self.forward_metadata = ForwardMetadata(
                self.cuda_graph_attn_logits, self.cuda_graph_attn_lse, None, self.cuda_graph_num_kv_splits,
                spec_info.kv_indptr$draft_capture, spec_info.kv_indices, None, None, None,
            )
            return
        self._apply_cuda_graph_metadata(
            bs, forward_batch.req_pool_indices, forward_batch.seq_lens, mode, spec_info, in_capture
        )
        if in_capture:
            self.forward_metadata = self._build_cuda_graph_forward_metadata(bs, mode)

    def _apply_cuda_graph_metadata(self, bs, req_pool_indices, seq_lens, forward_mode, spec_info, in_capture):
        if forward_mode.is_decode_or_idle():
            lens = seq_lens[:bs] if in_capture else $decode_replay_lens
            self._fill_kv_indptr_and_indices(bs, lens, req_pool_indices[:bs], self.cuda_graph_kv_indices)
            self.get_num_kv_splits(self.cuda_graph_num_kv_splits[:bs], seq_lens[:bs])
        elif forward_mode.is_target_verify():
            if in_capture:
                self.cuda_graph_verify_width = $apply_capture_width
            width = self.cuda_graph_verify_width if in_capture else $replay_width
            extra = 0 if in_capture else $verify_replay_extra
            self._update_target_verify_buffers(bs, width, req_pool_indices, seq_lens, spec_info, extra)
        elif forward_mode.is_draft_extend_v2():
            prefix_only = True if in_capture else $de_replay_prefix
            self._update_draft_extend_buffers(bs, req_pool_indices, seq_lens, spec_info, prefix_only)
        else:
            raise ValueError(f"Invalid forward mode: {forward_mode=} for CUDA Graph.")

    def _build_cuda_graph_forward_metadata(self, bs, forward_mode):
        kv_indptr, kv_indices = self.kv_indptr[: bs + 1]$decode_capture, self.cuda_graph_kv_indices
        if forward_mode.is_decode_or_idle():
            return ForwardMetadata(
                self.cuda_graph_attn_logits, self.cuda_graph_attn_lse, None, self.cuda_graph_num_kv_splits,
                kv_indptr, kv_indices, None, None, None,
            )
        if forward_mode.is_target_verify():
            return ForwardMetadata(
                None, None, $verify_capture_len, None, self.kv_indptr[: bs + 1], kv_indices,
                self.qo_indptr[: bs + 1], self.cuda_graph_custom_mask, self.mask_indptr[: bs + 1],
            )
        return ForwardMetadata(
            None, None, $de_capture_len, None,
            self.kv_indptr[: bs + 1], kv_indices, self.qo_indptr[: bs + 1], None, None,
        )
"""

DRAFT_IMPORT = "from sglang.srt.speculative.spec_utils import generate_draft_decode_kv_indices\n"


def _values(v: Variant) -> dict[str, str]:
    width = "spec_info.num_tokens_per_req" if v.decoupled else "self.num_draft_tokens"
    return {
        "draft_import": DRAFT_IMPORT if v.drafts else "",
        "eager_width": width,
        "class_attrs": "    needs_cpu_seq_lens: bool = False\n\n" if v.era == "T3" else "",
        "capture_width": "num_tokens // bs" if v.decoupled else "self.num_draft_tokens",
        "apply_capture_width": width,
        "replay_width": (
            "self.num_draft_tokens" if v.has(Bug.VERIFY_T_NE_N) or not v.decoupled else "self.cuda_graph_verify_width"
        ),
        "verify_capture_len": "1" if v.has(Bug.VERIFY_CAPTURE) else "self.cuda_graph_verify_width",
        "verify_replay_extra": "self.num_draft_tokens" if v.has(Bug.VERIFY_REPLAY) else "0",
        "decode_capture": ".clone()" if v.has(Bug.DECODE_CAPTURE) else "",
        "decode_replay_lens": "seq_lens[:bs] - 1" if v.has(Bug.DECODE_REPLAY) else "seq_lens[:bs]",
        "draft_capture": ".clone()" if v.has(Bug.DRAFT_DECODE_CAPTURE) else "",
        "draft_replay_prefix": "forward_batch.seq_lens - 1" if v.has(Bug.DRAFT_DECODE_REPLAY) else "None",
        "de_width": "self.speculative_num_steps + 1" if v.has(Bug.DRAFT_EXTEND_TOPK) else "self.num_draft_tokens",
        "de_capture_len": "1" if v.has(Bug.DRAFT_EXTEND_CAPTURE) else "self._draft_extend_width()",
        "de_replay_prefix": "False" if v.has(Bug.DRAFT_EXTEND_REPLAY) else "True",
    }


def backend_text(v: Variant) -> str:
    """The text of ``triton_backend.py`` for ``v``."""
    values = _values(v)
    values["capture_draft_extend"] = Template(CAPTURE_DRAFT_EXTEND).substitute(values) if v.drafts else ""
    values["replay_draft_extend"] = Template(REPLAY_DRAFT_EXTEND).substitute(values) if v.drafts else ""
    parts = [HEADER, COMMON]
    if v.drafts:
        parts.append(DRAFT_EXTEND_HELPER)
    parts.append(OUT_OF_GRAPH if v.era == "T3" else CAPTURE_REPLAY)
    if v.drafts:
        parts += [MULTI_STEP, MULTI_OUT_OF_GRAPH if v.era == "T3" else MULTI_CAPTURE_REPLAY]
    return "".join(Template(part).substitute(values) for part in parts)


def spec_utils_text() -> str:
    """The module that defines the draft-decode kernel."""
    return SPEC_UTILS
