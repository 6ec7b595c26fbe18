"""The speculative-decoding modules the SGLang-shaped FlashInfer backend reads: the spec-infos
that build a verify or draft-extend layout (``eagle_info``) and the draft-decode kernel
(``spec_utils``), shaped like the real ones."""

from __future__ import annotations

EAGLE_INFO_PATH = "python/sglang/srt/speculative/eagle_info.py"
SPEC_UTILS_PATH = "python/sglang/srt/speculative/spec_utils.py"

EAGLE_INFO = """\
from dataclasses import dataclass
from typing import List, Optional

import torch

from sglang.srt.layers.attention.utils import create_flashinfer_kv_indices_triton
from sglang.srt.speculative.spec_info import SpecInput, SpecInputType


@dataclass
class EagleVerifyInput(SpecInput):
    draft_token: torch.Tensor
    custom_mask: torch.Tensor
    positions: torch.Tensor
    retrieve_index: torch.Tensor
    spec_steps: int
    topk: int
    draft_token_num: int
    seq_lens_sum: int
    seq_lens_cpu: torch.Tensor

    def __post_init__(self):
        super().__init__(SpecInputType.EAGLE_VERIFY)

    def get_spec_adjust_token_coefficient(self):
        return self.draft_token_num, self.draft_token_num

    def generate_attn_arg_prefill(self, req_pool_indices, paged_kernel_lens, paged_kernel_lens_sum, req_to_token):
        device = req_pool_indices.device
        batch_size = len(req_pool_indices)
        qo_indptr = torch.arange(
            0, (1 + batch_size) * self.draft_token_num, step=self.draft_token_num, dtype=torch.int32, device=device
        )
        cum_kv_seq_len = torch.zeros((batch_size + 1,), dtype=torch.int32, device=device)
        paged_kernel_lens = paged_kernel_lens + self.draft_token_num
        cum_kv_seq_len[1:] = torch.cumsum(paged_kernel_lens, dim=0)
        kv_indices = torch.empty(
            paged_kernel_lens_sum + self.draft_token_num * batch_size, dtype=torch.int32, device=device
        )
        create_flashinfer_kv_indices_triton[(batch_size,)](
            req_to_token, req_pool_indices, paged_kernel_lens, cum_kv_seq_len, None, kv_indices, req_to_token.size(1)
        )
        mask_numel = paged_kernel_lens_sum * self.draft_token_num + (self.draft_token_num**2) * batch_size
        if self.custom_mask.numel() < mask_numel:
            padding = torch.full((mask_numel - self.custom_mask.numel(),), True, dtype=torch.bool, device=device)
            self.custom_mask = torch.cat([self.custom_mask, padding], dim=0)
        return kv_indices, cum_kv_seq_len, qo_indptr, self.custom_mask


@dataclass
class EagleDraftInput(SpecInput):
    topk_p: torch.Tensor = None
    topk_index: torch.Tensor = None
    hidden_states: torch.Tensor = None
    verified_id: torch.Tensor = None
    accept_length: torch.Tensor = None
    accept_length_cpu: List[int] = None
    kv_indptr: torch.Tensor = None
    kv_indices: torch.Tensor = None
    num_tokens_per_batch: int = -1
    seq_lens_for_draft_extend: Optional[torch.Tensor] = None

    def __post_init__(self):
        super().__init__(SpecInputType.EAGLE_DRAFT)

    def get_spec_adjust_token_coefficient(self):
        return self.num_tokens_per_batch, self.num_tokens_per_batch

    def generate_attn_arg_prefill(self, req_pool_indices, paged_kernel_lens, paged_kernel_lens_sum, req_to_token):
        device = req_pool_indices.device
        bs = self.accept_length.numel()
        qo_indptr = torch.arange(
            0, (bs + 1) * self.num_tokens_per_batch, step=self.num_tokens_per_batch, dtype=torch.int32, device=device
        )
        cum_kv_seq_len = torch.zeros((bs + 1,), dtype=torch.int32, device=device)
        cum_kv_seq_len[1:] = torch.cumsum(paged_kernel_lens, dim=0)
        kv_indices = torch.empty(paged_kernel_lens_sum, dtype=torch.int32, device=device)
        create_flashinfer_kv_indices_triton[(bs,)](
            req_to_token, req_pool_indices, paged_kernel_lens, cum_kv_seq_len, None, kv_indices, req_to_token.size(1)
        )
        return kv_indices, cum_kv_seq_len, qo_indptr, None
"""

SPEC_UTILS = '''\
import triton
import triton.language as tl


@triton.jit
def generate_draft_decode_kv_indices(
    req_pool_indices,
    req_to_token,
    paged_kernel_lens,
    kv_indices,
    kv_indptr,
    positions,
    pool_len: tl.constexpr,
    kv_indices_stride: tl.constexpr,
    kv_indptr_stride: tl.constexpr,
    bs_upper: tl.constexpr,
    iter_upper: tl.constexpr,
    num_tokens_upper: tl.constexpr,
    page_size: tl.constexpr,
):
    """Every draft step's KV indices and indptr, for every branch of every sequence."""
    BLOCK_SIZE: tl.constexpr = 128
    iters = tl.program_id(axis=0)
    bid = tl.program_id(axis=1)
    topk_id = tl.program_id(axis=2)
    num_steps = tl.num_programs(axis=0)
    num_seqs = tl.num_programs(axis=1)
    topk = tl.num_programs(axis=2)
    kv_indices += kv_indices_stride * iters
    kv_indptr += kv_indptr_stride * iters
    iters += 1
    load_offset = tl.arange(0, bs_upper)
    seq_lens = tl.load(paged_kernel_lens + load_offset, mask=load_offset < bid, other=0)
    seq_len = tl.load(paged_kernel_lens + bid)
    cum_seq_len = tl.sum(seq_lens)
    kv_ptr = kv_indices + cum_seq_len * topk + bid * iters * topk + topk_id * (seq_len + iters)
    token_pool_ptr = req_to_token + tl.load(req_pool_indices + bid) * pool_len
    kv_offset = tl.arange(0, BLOCK_SIZE)
    for _ in range(tl.cdiv(seq_len, BLOCK_SIZE)):
        mask = kv_offset < seq_len
        tl.store(kv_ptr + kv_offset, tl.load(token_pool_ptr + kv_offset, mask=mask), mask=mask)
        kv_offset += BLOCK_SIZE
    extend_offset = tl.arange(0, iter_upper)
    extend_data = tl.load(token_pool_ptr + seq_len + topk_id * num_steps + extend_offset, mask=extend_offset < iters)
    tl.store(kv_ptr + seq_len + extend_offset, extend_data, mask=extend_offset < iters)
    bs_offset = tl.arange(0, num_tokens_upper)
    zid = bid * topk + topk_id
    if zid == 0:
        zid = num_seqs * topk
    positions = tl.load(positions + bs_offset, mask=bs_offset < zid, other=0)
    tl.store(kv_indptr + zid, tl.sum(positions) + zid * iters)
'''
