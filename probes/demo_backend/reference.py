"""Reference attention computed straight from ``req_to_token``, independent of the backend's code.

It never looks at the page table or the metadata under test: token positions map to slots, slots
to (page, offset), and the draft tokens attend causally to the prefix and to the drafts before them.
"""

from __future__ import annotations

import math

import torch


def reference_attention(
    req_to_token: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    req_pool_indices: list[int],
    kv_lens: list[int],
    q: torch.Tensor,
    q_len: int,
    compute_dtype: torch.dtype,
) -> torch.Tensor:
    """``[len(req) * q_len, num_q_heads, head_dim]`` in ``compute_dtype``.

    ``k_cache``/``v_cache`` are ``[num_pages, num_kv_heads, page_size, head_dim]``; the last
    ``q_len`` of each request's ``kv_lens`` tokens are its query tokens.
    """
    page_size, num_kv_heads, head_dim = k_cache.shape[2], k_cache.shape[1], k_cache.shape[3]
    group = q.shape[1] // num_kv_heads
    outputs = []
    for b, (req, kv_len) in enumerate(zip(req_pool_indices, kv_lens)):
        slots = req_to_token[req, :kv_len].long()
        pages, offsets = slots // page_size, slots % page_size
        k = k_cache[pages, :, offsets].to(compute_dtype)
        v = v_cache[pages, :, offsets].to(compute_dtype)
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        qb = q[b * q_len : (b + 1) * q_len].to(compute_dtype)
        scores = torch.einsum("qhd,khd->hqk", qb, k) / math.sqrt(head_dim)
        allowed = (
            torch.arange(kv_len, device=q.device)[None, :]
            <= torch.arange(kv_len - q_len, kv_len, device=q.device)[:, None]
        )
        scores = scores.masked_fill(~allowed[None], float("-inf"))
        outputs.append(torch.einsum("hqk,khd->qhd", scores.softmax(-1), v))
    return torch.cat(outputs)
