"""The topk > 1 part of an SGLang-shaped ``flashattention_backend.py``: draft decode and target
verify as a cascade of a prefix call and an expand call (``forward_metadata_spec_decode_expand``).

The prefix call's rows are each request's query rows over its shared prefix (draft decode with
pages > 1: its full pages only); the expand call's rows are one per branch (draft decode: the
copied partial page, then the branch's first step + 1 drafts, as pages) or one per draft-tree
token (target verify: the draft tokens its tree-mask row marks, masked first, token by token).
The same routines serve the eager path and the graph's capture (binding the buffers) and replay
(filling them); each planted stride bug is one changed expression.
"""

from __future__ import annotations

from string import Template
from textwrap import dedent, indent

from .variant import Bug, Variant

METHODS = """
def _cascade(self, forward_mode, spec_info):
    draft_or_verify = forward_mode.is_decode_or_idle() or forward_mode.is_target_verify()
    return self.topk > 1 and spec_info is not None and draft_or_verify

def _cascade_state(self, max_bs):
    if self.topk <= 1:
        return
    self.draft_decode_metadata_topk = self._cascade_buffers(max_bs, self.topk, self.speculative_step_id + 2)
    verify_width = self.speculative_num_draft_tokens
    self.target_verify_metadata_topk = self._cascade_buffers(max_bs, verify_width, verify_width)

def _cascade_buffers(self, max_bs, q_per_req, expand_width):
    rows = max_bs * q_per_req
    return {
        "cache_seqlens": torch.zeros(max_bs, dtype=torch.int32),
        "cu_seqlens_q": torch.arange(0, rows + 1, q_per_req, dtype=torch.int32),
        "cu_seqlens_k": torch.zeros(max_bs + 1, dtype=torch.int32),
        "page_table": torch.zeros(max_bs, self.max_num_pages, dtype=torch.int32),
        "expand_cache_seqlens": torch.zeros(rows, dtype=torch.int32),
        "expand_cu_seqlens_q": torch.arange(0, rows + 1, dtype=torch.int32),
        "expand_cu_seqlens_k": torch.zeros(rows + 1, dtype=torch.int32),
        "expand_page_table": torch.zeros(rows, expand_width, dtype=torch.int32),
    }

def _cascade_shape(self, forward_mode):
    if forward_mode.is_target_verify():
        return self.target_verify_metadata_topk, self.speculative_num_draft_tokens
    return self.draft_decode_metadata_topk, self.topk

def _init_cascade_metadata(self, forward_batch):
    mode, bs = forward_batch.forward_mode, forward_batch.batch_size
    _, q_per_req = self._cascade_shape(mode)
    prefix_lens, expand_lens, expand_rows = self._cascade_values(
        mode, forward_batch.spec_info, forward_batch.req_pool_indices, forward_batch.seq_lens,
        forward_batch.out_cache_loc,
    )
    metadata, expand = FlashAttentionMetadata(), FlashAttentionMetadata()
    metadata.cache_seqlens_int32 = prefix_lens.to(torch.int32)
    metadata.max_seq_len_q = q_per_req
    metadata.cu_seqlens_q = torch.arange(0, bs * q_per_req + 1, q_per_req, dtype=torch.int32)
    metadata.cu_seqlens_k = torch.nn.functional.pad(torch.cumsum(prefix_lens, dim=0, dtype=torch.int32), (1, 0))
    metadata.page_table = self._prefix_pages(forward_batch.req_pool_indices)
    expand.cache_seqlens_int32 = expand_lens.to(torch.int32)
    expand.cu_seqlens_q = torch.arange(0, expand_lens.numel() + 1, dtype=torch.int32)
    expand.cu_seqlens_k = torch.nn.functional.pad(torch.cumsum(expand_lens, dim=0, dtype=torch.int32), (1, 0))
    expand.page_table = expand_rows.to(torch.int32)
    self.forward_metadata, self.forward_metadata_spec_decode_expand = metadata, expand

def _bind_cascade(self, bs, forward_mode):
    buffers, q_per_req = self._cascade_shape(forward_mode)
    rows = bs * q_per_req
    metadata, expand = FlashAttentionMetadata(), FlashAttentionMetadata()
    metadata.cache_seqlens_int32 = buffers["cache_seqlens"][:bs]
    metadata.max_seq_len_q = q_per_req
    metadata.cu_seqlens_q = buffers["cu_seqlens_q"][: bs + 1]
    metadata.cu_seqlens_k = buffers["cu_seqlens_k"][: bs + 1]
    metadata.page_table = buffers["page_table"][:bs, :]
    expand.cache_seqlens_int32 = buffers["expand_cache_seqlens"][:rows]
    expand.cu_seqlens_q = buffers["expand_cu_seqlens_q"][: rows + 1]
    expand.cu_seqlens_k = buffers["expand_cu_seqlens_k"][: rows + 1]
    expand.page_table = buffers["expand_page_table"][:rows, :]
    buffers[bs] = (metadata, expand)
    self.forward_metadata, self.forward_metadata_spec_decode_expand = metadata, expand

def _apply_cascade(self, bs, req_pool_indices, seq_lens, forward_mode, spec_info, out_cache_loc):
    buffers, _ = self._cascade_shape(forward_mode)
    metadata, expand = buffers[bs]
    prefix_lens, expand_lens, expand_rows = self._cascade_values(
        forward_mode, spec_info, req_pool_indices, seq_lens, out_cache_loc
    )
    metadata.cache_seqlens_int32.copy_(prefix_lens)
    metadata.cu_seqlens_k[1:].copy_(torch.cumsum(prefix_lens, dim=0, dtype=torch.int32))
    metadata.page_table.copy_(self._prefix_pages(req_pool_indices))
    expand.cache_seqlens_int32.copy_(expand_lens)
    expand.cu_seqlens_k[1:].copy_(torch.cumsum(expand_lens, dim=0, dtype=torch.int32))
    expand.page_table[: expand_rows.shape[0], : expand_rows.shape[1]].copy_(expand_rows)
    self.forward_metadata, self.forward_metadata_spec_decode_expand = metadata, expand

def _prefix_pages(self, req_pool_indices):
    strided = torch.arange(0, self.max_context_len, self.page_size)
    return self.req_to_token[req_pool_indices[:, None], strided[None, :]] // self.page_size

def _cascade_values(self, forward_mode, spec_info, req_pool_indices, seq_lens, out_cache_loc):
    if forward_mode.is_target_verify():
        expand_lens, expand_rows = self._verify_expand(req_pool_indices, seq_lens, spec_info)
        return seq_lens, expand_lens, expand_rows
    last_page_lens = seq_lens % self.page_size
    expand_lens, expand_rows = self._draft_expand(last_page_lens, out_cache_loc)
    return seq_lens - last_page_lens, expand_lens, expand_rows

def _draft_expand(self, last_page_lens, out_cache_loc):
    decode_length = self.speculative_step_id + 1
    steps = self.speculative_num_steps
    cache_loc = ${branch_slots}[:, :decode_length]
    pages = cache_loc // self.page_size
    first = torch.ones_like(pages, dtype=torch.bool)
    first[:, 1:] = pages[:, 1:] != pages[:, :-1]
    rows = torch.zeros(pages.shape[0], decode_length + 1, dtype=torch.int64)
    rows.scatter_(1, first.long().cumsum(dim=1) - 1, pages)
    return decode_length + last_page_lens.repeat_interleave(self.topk), rows

def _verify_expand(self, req_pool_indices, seq_lens, spec_info):
    n = self.speculative_num_draft_tokens
    offsets = torch.arange(n)
    cols = seq_lens[:, None].long() + offsets[None, :]
    mask_rows = (${mask_row_len}).repeat_interleave(n)
    row_starts = torch.nn.functional.pad(torch.cumsum(mask_rows, dim=0), (1, 0))[:-1]
    index = cols.repeat_interleave(n, dim=0) + row_starts[:, None]
    index[spec_info.positions.numel() :] = 0
    mask = spec_info.custom_mask[index]
    order = torch.sort(torch.where(mask, offsets, offsets + n), dim=1).indices
    slots = self.req_to_token[req_pool_indices[:, None], cols].repeat_interleave(n, dim=0)
    return mask.sum(dim=1), slots.gather(1, order)
"""

BRANCH_MAJOR = "out_cache_loc.view(-1, steps)"
"""``out_cache_loc`` holds each request's branches one after another, each its ``num_steps`` slots."""
STEP_MAJOR = "out_cache_loc.view(-1, steps, self.topk).transpose(1, 2).reshape(-1, steps)"


def cascade_methods(v: Variant) -> str:
    """The cascade's methods of ``FlashAttentionBackend``, indented into the class body."""
    text = Template(dedent(METHODS)).substitute(
        branch_slots=STEP_MAJOR if v.has(Bug.DRAFT_DECODE_TOPK_STRIDE) else BRANCH_MAJOR,
        mask_row_len="seq_lens.long()" if v.has(Bug.VERIFY_TOPK_STRIDE) else "seq_lens.long() + n",
    )
    return indent(text, "    ")


def cascade_hooks(v: Variant) -> dict[str, str]:
    """Where the eager path, the state, the capture and the replay hand topk > 1 to the cascade
    (nothing in an era without a multi-step draft backend)."""
    if v.era == "F0":
        return dict.fromkeys(("cascade_eager", "cascade_state", "cascade_bind", "cascade_apply"), "")
    return {
        "cascade_eager": "    if self._cascade(forward_batch.forward_mode, forward_batch.spec_info):\n"
        "        return self._init_cascade_metadata(forward_batch)\n",
        "cascade_state": "    self._cascade_state(max_bs)\n",
        "cascade_bind": "    if self._cascade(forward_mode, spec_info):\n"
        "        return self._bind_cascade(bs, forward_mode)\n",
        "cascade_apply": "    if self._cascade(forward_mode, spec_info):\n"
        "        return self._apply_cascade(bs, req_pool_indices, seq_lens, forward_mode, spec_info, out_cache_loc)\n",
    }
