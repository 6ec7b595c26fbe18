"""The text of an SGLang-shaped ``flashinfer_backend.py`` for one :class:`Variant`.

Same module path, classes, method names, signatures and attributes as the real file in its era,
with small bodies of real torch code; each planted bug is one changed expression.
"""

from __future__ import annotations

from string import Template

from .variant import Bug, Variant

HEADER = '''\
from __future__ import annotations

"""
Attention through flashinfer's paged prefill and decode wrappers.
"""

import copy
import logging
from dataclasses import dataclass
from functools import partial
from types import SimpleNamespace
from typing import TYPE_CHECKING, Callable, List

import torch

from sglang.srt.layers.attention.base_attn_backend import AttentionBackend
from sglang.srt.layers.attention.utils import create_flashinfer_kv_indices_triton
from sglang.srt.model_executor.forward_batch_info import ForwardBatch, ForwardMode
from sglang.srt.speculative.spec_utils import generate_draft_decode_kv_indices
from sglang.srt.utils import is_flashinfer_available, next_power_of_2

if TYPE_CHECKING:
    from sglang.srt.model_executor.model_runner import ModelRunner

logger = logging.getLogger(__name__)

if is_flashinfer_available():
    from flashinfer import (
        BatchDecodeWithPagedKVCacheWrapper,
        BatchPrefillWithPagedKVCacheWrapper,
        BatchPrefillWithRaggedKVCacheWrapper,
        fast_decode_plan,
    )

global_override_indptr_cpu = None


@dataclass
class DecodeMetadata:
    decode_wrappers: List[BatchDecodeWithPagedKVCacheWrapper]


@dataclass
class PrefillMetadata:
    prefill_wrappers: List[BatchPrefillWithPagedKVCacheWrapper]
    use_ragged: bool
    extend_no_prefix: bool


class FlashInferAttnBackend(AttentionBackend):
    """Flashinfer attention kernels."""

    def __init__(self, model_runner: ModelRunner, skip_prefill=False, kv_indptr_buf=None, kv_last_page_len_buf=None):
        super().__init__()
        self.device = model_runner.device
        self.req_to_token_pool = model_runner.req_to_token_pool
        self.token_to_kv_pool = model_runner.token_to_kv_pool
        self.max_context_len = model_runner.model_config.context_len
        self.page_size = model_runner.page_size
        self.skip_prefill = skip_prefill
        self.num_wrappers = 1
        self.dispatch_reason = None
        self.use_paged = False
        self.speculative_num_draft_tokens = model_runner.server_args.speculative_num_draft_tokens
        self.workspace_buffer = torch.empty(128 * 1024 * 1024, dtype=torch.uint8, device=self.device)
        max_bs = model_runner.req_to_token_pool.size
        if kv_indptr_buf is None:
            kv_indptr_buf = torch.zeros((max_bs + 1,), dtype=torch.int32, device=self.device)
        self.kv_indptr = [kv_indptr_buf]
        if kv_last_page_len_buf is None:
            kv_last_page_len_buf = torch.ones((max_bs,), dtype=torch.int32, device=self.device)
        self.kv_last_page_len = kv_last_page_len_buf
        if not skip_prefill:
            self.qo_indptr = [torch.zeros((max_bs + 1,), dtype=torch.int32, device=self.device)]
        self.prefill_wrapper_ragged = BatchPrefillWithRaggedKVCacheWrapper(self.workspace_buffer, "NHD")
        self.prefill_wrappers_paged = [BatchPrefillWithPagedKVCacheWrapper(self.workspace_buffer, "NHD")]
        self.prefill_wrappers_verify = [BatchPrefillWithPagedKVCacheWrapper(self.workspace_buffer, "NHD")]
        self.decode_wrappers = [BatchDecodeWithPagedKVCacheWrapper(self.workspace_buffer, "NHD")]
        if not skip_prefill:
            self.indices_updater_prefill = FlashInferIndicesUpdaterPrefill(model_runner, self)
        self.indices_updater_decode = FlashInferIndicesUpdaterDecode(model_runner, self)
        self.forward_metadata = None
        self.decode_cuda_graph_metadata = {}
        self.prefill_cuda_graph_metadata = {}
        self.draft_extend_cuda_graph_metadata = {}

    def init_forward_metadata(self, forward_batch: ForwardBatch):
        fb = forward_batch
        if fb.forward_mode.is_decode_or_idle():
            self.indices_updater_decode.update(
                fb.req_pool_indices, fb.seq_lens, fb.seq_lens_cpu, fb.seq_lens_sum,
                decode_wrappers=self.decode_wrappers, encoder_lens=fb.encoder_lens, spec_info=fb.spec_info,
            )
            self.forward_metadata = DecodeMetadata(self.decode_wrappers)
        elif fb.forward_mode.is_target_verify():
            self.indices_updater_prefill.update(
                fb.req_pool_indices, fb.seq_lens, fb.seq_lens_cpu, fb.seq_lens_sum, prefix_lens=None,
                prefill_wrappers=self.prefill_wrappers_verify, use_ragged=False,
                encoder_lens=fb.encoder_lens, spec_info=fb.spec_info,
            )
            self.forward_metadata = PrefillMetadata(self.prefill_wrappers_verify, False, False)
        else:
            use_ragged = not self.use_paged
            self.indices_updater_prefill.update(
                fb.req_pool_indices, fb.seq_lens, fb.seq_lens_cpu, fb.seq_lens_sum,
                prefix_lens=fb.extend_prefix_lens, prefill_wrappers=self.prefill_wrappers_paged,
                use_ragged=use_ragged, encoder_lens=fb.encoder_lens, spec_info=None,
            )
            no_prefix = not any(fb.extend_prefix_lens_cpu)
            self.forward_metadata = PrefillMetadata(self.prefill_wrappers_paged, use_ragged, no_prefix)

    def init_cuda_graph_state(self, max_bs: int, max_num_tokens: int, kv_indices_buf=None):
        if kv_indices_buf is None:
            kv_indices_buf = torch.zeros((max_num_tokens * self.max_context_len,), dtype=torch.int32, device="cuda")
        self.cuda_graph_kv_indices = [kv_indices_buf]
        if not self.skip_prefill:
            self.cuda_graph_custom_mask = torch.zeros(
                (max_num_tokens * self.max_context_len), dtype=torch.uint8, device="cuda"
            )
            self.cuda_graph_qk_indptr = [x.clone() for x in self.kv_indptr]
            self.cuda_graph_qo_indptr = [x.clone() for x in self.kv_indptr]

    def _create_decode_wrappers(self, bs: int, num_tokens: int, spec_info) -> list:
        indptr = self.kv_indptr[0][: num_tokens + 1]
        ${decode_capture}
        return [
            BatchDecodeWithPagedKVCacheWrapper(
                self.workspace_buffer, "NHD", use_cuda_graph=True, paged_kv_indptr_buffer=indptr,
                paged_kv_indices_buffer=self.cuda_graph_kv_indices[0],
                paged_kv_last_page_len_buffer=self.kv_last_page_len[:num_tokens],
            )
        ]

    def _create_prefill_wrappers(self, bs: int, use_custom_mask: bool, qo_indptr) -> list:
        extra = {}
        if use_custom_mask:
            extra = {
                "custom_mask_buf": self.cuda_graph_custom_mask,
                "mask_indptr_buf": self.cuda_graph_qk_indptr[0][: bs + 1],
            }
        return [
            BatchPrefillWithPagedKVCacheWrapper(
                self.workspace_buffer, "NHD", use_cuda_graph=True, backend="fa2", qo_indptr_buf=qo_indptr[: bs + 1],
                paged_kv_indptr_buf=self.kv_indptr[0][: bs + 1], paged_kv_indices_buf=self.cuda_graph_kv_indices[0],
                paged_kv_last_page_len_buf=self.kv_last_page_len[:bs], **extra,
            )
        ]
'''

GRAPH_A = """
    def init_forward_metadata_capture_cuda_graph(
        self, bs, num_tokens, req_pool_indices, seq_lens, encoder_lens, forward_mode, spec_info
    ):
        if forward_mode.is_decode_or_idle():
            decode_wrappers = self._create_decode_wrappers(bs, num_tokens, spec_info)
            self.indices_updater_decode.update(
                req_pool_indices, seq_lens, seq_lens.cpu(), seq_lens.sum().item(),
                decode_wrappers=decode_wrappers, encoder_lens=encoder_lens, spec_info=spec_info,
            )
            self.decode_cuda_graph_metadata[bs] = decode_wrappers
            self.forward_metadata = DecodeMetadata(decode_wrappers)
            for wrapper in decode_wrappers:
                wrapper.begin_forward = partial(fast_decode_plan, wrapper)
        elif forward_mode.is_target_verify():
            prefill_wrappers = self._create_prefill_wrappers(bs, ${verify_mask}, self.cuda_graph_qo_indptr[0])
            self.indices_updater_prefill.update(
                req_pool_indices, seq_lens, seq_lens.cpu(), seq_lens.sum().item(), prefix_lens=None,
                prefill_wrappers=prefill_wrappers, use_ragged=False, encoder_lens=encoder_lens, spec_info=spec_info,
            )
            self.prefill_cuda_graph_metadata[bs] = prefill_wrappers
            self.forward_metadata = PrefillMetadata(prefill_wrappers, False, False)
        else:
            raise ValueError(f"Invalid mode: {forward_mode=}")

    def init_forward_metadata_replay_cuda_graph(
        self, bs, req_pool_indices, seq_lens, seq_lens_sum, encoder_lens, forward_mode, spec_info, seq_lens_cpu
    ):
        if forward_mode.is_decode_or_idle():
            self.indices_updater_decode.update(
                req_pool_indices[:bs], ${decode_lens}, seq_lens_cpu[:bs] if seq_lens_cpu is not None else None,
                seq_lens_sum, decode_wrappers=self.decode_cuda_graph_metadata[bs], encoder_lens=None,
                spec_info=spec_info,
            )
        elif forward_mode.is_target_verify():
            ${verify_t}
            self.indices_updater_prefill.update(
                req_pool_indices[:bs], ${verify_lens}, seq_lens_cpu[:bs] if seq_lens_cpu is not None else None,
                seq_lens_sum, prefix_lens=None, prefill_wrappers=self.prefill_cuda_graph_metadata[bs],
                use_ragged=False, encoder_lens=None, spec_info=spec_info,
            )
        else:
            raise ValueError("Invalid forward mode")

    def get_cuda_graph_seq_len_fill_value(self):
        return 1
"""

GRAPH_B = """
    def init_forward_metadata_out_graph(self, forward_batch: ForwardBatch, in_capture: bool = False):
        bs = forward_batch.batch_size
        req_pool_indices, seq_lens = forward_batch.req_pool_indices, forward_batch.seq_lens
        seq_lens_cpu, seq_lens_sum = forward_batch.seq_lens_cpu, forward_batch.seq_lens_sum
        forward_mode, spec_info = forward_batch.forward_mode, forward_batch.spec_info
        host = seq_lens_cpu[:bs] if seq_lens_cpu is not None else None
        if in_capture:
            self._prepare_cuda_graph_metadata(bs, forward_batch.positions.numel(), forward_mode, spec_info)
        if forward_mode.is_decode_or_idle():
            self.indices_updater_decode.update(
                req_pool_indices[:bs], ${decode_lens}, host, seq_lens_sum,
                decode_wrappers=self.decode_cuda_graph_metadata[bs], encoder_lens=None, spec_info=spec_info,
            )
        elif forward_mode.is_target_verify():
            ${verify_t}
            self.indices_updater_prefill.update(
                req_pool_indices[:bs], ${verify_lens}, host, seq_lens_sum, prefix_lens=None,
                prefill_wrappers=self.prefill_cuda_graph_metadata[bs], use_ragged=False, encoder_lens=None,
                spec_info=spec_info,
            )
        elif forward_mode.is_draft_extend_v2():
            self.indices_updater_prefill.update(
                req_pool_indices[:bs], ${extend_lens}, host, seq_lens_sum, prefix_lens=None,
                prefill_wrappers=self.draft_extend_cuda_graph_metadata[bs], use_ragged=False, encoder_lens=None,
                spec_info=spec_info,
            )
        else:
            raise ValueError("Invalid forward mode")
        if in_capture and forward_mode.is_decode_or_idle():
            for wrapper in self.decode_cuda_graph_metadata[bs]:
                wrapper.begin_forward = partial(fast_decode_plan, wrapper)

    def _prepare_cuda_graph_metadata(self, bs, num_tokens, forward_mode, spec_info) -> None:
        if forward_mode.is_decode_or_idle():
            decode_wrappers = self._create_decode_wrappers(bs, num_tokens, spec_info)
            self.decode_cuda_graph_metadata[bs] = decode_wrappers
            self.forward_metadata = DecodeMetadata(decode_wrappers)
        elif forward_mode.is_target_verify():
            prefill_wrappers = self._create_prefill_wrappers(bs, ${verify_mask}, self.cuda_graph_qo_indptr[0])
            self.prefill_cuda_graph_metadata[bs] = prefill_wrappers
            self.forward_metadata = PrefillMetadata(prefill_wrappers, False, False)
        elif forward_mode.is_draft_extend_v2():
            prefill_wrappers = self._create_prefill_wrappers(bs, False, ${extend_qo})
            self.draft_extend_cuda_graph_metadata[bs] = prefill_wrappers
            self.forward_metadata = PrefillMetadata(prefill_wrappers, False, False)
        else:
            raise ValueError(f"Invalid mode: {forward_mode=}")

    def get_cuda_graph_seq_len_fill_value(self):
        return 1
"""


def backend_text(v: Variant) -> str:
    """The whole ``flashinfer_backend.py`` of ``v``."""
    from .updaters import MULTI_STEP, UPDATERS, multi_step_graph

    values = _values(v)
    graph = GRAPH_A if v.era == "A" else GRAPH_B
    body = Template(HEADER + graph).substitute(values) + UPDATERS
    return body + Template(MULTI_STEP + multi_step_graph(v.era)).substitute(values)


def _values(v: Variant) -> dict[str, str]:
    replay = "seq_lens[:bs] - 1" if v.era == "A" else "seq_lens[:bs] if in_capture else seq_lens[:bs] - 1"

    def lens(bug: Bug) -> str:
        return replay if v.has(bug) else "seq_lens[:bs]"

    pad = " " * (12 if v.era == "A" else 16)
    t_ne_n = f"spec_info = copy.copy(spec_info)\n{pad}spec_info.draft_token_num = self.speculative_num_draft_tokens"
    if v.era == "B":
        t_ne_n = f"if not in_capture:\n{pad}{t_ne_n}"
    copy_indptr = "if spec_info is None:\n            indptr = indptr.clone()"
    draft_spec = "forward_batch.spec_info"
    if v.has(Bug.DRAFT_DECODE_REPLAY):
        draft_spec = "None" if v.era == "A" else "fb.spec_info if in_capture else None"
    return {
        "decode_capture": copy_indptr if v.has(Bug.DECODE_CAPTURE) else "",
        "verify_mask": "False" if v.has(Bug.VERIFY_CAPTURE) else "True",
        "extend_qo": "self.kv_indptr[0]" if v.has(Bug.DRAFT_EXTEND_CAPTURE) else "self.cuda_graph_qo_indptr[0]",
        "decode_lens": lens(Bug.DECODE_REPLAY),
        "verify_lens": lens(Bug.VERIFY_REPLAY),
        "extend_lens": lens(Bug.DRAFT_EXTEND_REPLAY),
        "verify_t": t_ne_n if v.has(Bug.VERIFY_T_NE_N) else "",
        "indices_copy": ".clone()" if v.has(Bug.DRAFT_DECODE_CAPTURE) else "",
        "indptr_rows": "num_seqs" if v.has(Bug.DRAFT_DECODE_TOPK) else "bs",
        "draft_spec": draft_spec,
    }
