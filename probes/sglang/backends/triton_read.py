"""What the Triton backend's attention call reads, from its ``ForwardMetadata``.

The decode kernel reads, for request (or draft branch: request-major, topk per request) b, the KV slots
``kv_indices[kv_indptr[b] : kv_indptr[b + 1]]``. The extend kernel (target verify, draft extend)
reads those as the cached prefix, then the K/V of the request's own query rows
``qo_indptr[b] : qo_indptr[b + 1]`` of the batch, launched over ``max_extend_len`` query rows per
request, and, where a tree mask is given, the mask bits from ``mask_indptr[b]``. The kernels read
``kv_indices`` through a pointer, so it is read here through its storage too: a graph reads past
the view it captured, as the GPU does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from probes.sglang.backends.base import AttentionRead, Mode, Shape
from probes.sglang.backends.triton_driven import Seen, tree_mask

EXTEND_MODES = (Mode.TARGET_VERIFY, Mode.DRAFT_EXTEND)


@dataclass(frozen=True)
class TritonCall:
    """The buffers one attention call was handed (references: a graph replay rewrites them), the
    Python scalar it was launched with, and the requests of the call."""

    kv_indptr: torch.Tensor | None
    kv_indices: torch.Tensor | None
    qo_indptr: torch.Tensor | None
    custom_mask: torch.Tensor | None
    mask_indptr: torch.Tensor | None
    max_extend_len: int | None
    seen: Seen

    @classmethod
    def of(cls, metadata: Any, seen: Seen) -> TritonCall:
        def tensor(name: str) -> torch.Tensor | None:
            value = getattr(metadata, name, None)
            return value if isinstance(value, torch.Tensor) else None

        scalar = getattr(metadata, "max_extend_len", None)
        return cls(
            tensor("kv_indptr"),
            tensor("kv_indices"),
            tensor("qo_indptr"),
            tensor("custom_mask"),
            tensor("mask_indptr"),
            int(scalar) if isinstance(scalar, (int, torch.Tensor)) else None,
            seen,
        )


def pointer_read(tensor: torch.Tensor, start: int, end: int) -> torch.Tensor | None:
    """``tensor``'s entries ``start .. end - 1`` counted from its first element through its
    storage, as a kernel handed its pointer reads them; None past the storage's end."""
    available = tensor.untyped_storage().nbytes() // tensor.element_size() - tensor.storage_offset()
    if start < 0 or end > available or end < start:
        return None
    return torch.as_strided(tensor, (available,), (1,), tensor.storage_offset())[start:end]


def read(source: TritonCall, shape: Shape, rows: int, req_to_token: torch.Tensor) -> AttentionRead:
    """What the call reads for the first ``rows`` requests; at topk > 1 also each query row's
    slots (draft decode: a branch each, request-major)."""
    problems: list[str] = []
    if source.kv_indptr is None or source.kv_indices is None:
        return AttentionRead([], [], [], problems=["kv_indptr or kv_indices missing"])
    branches = shape.topk if shape.mode is Mode.DRAFT_DECODE else 1
    bounds = pointer_read(source.kv_indptr, 0, rows * branches + 1)
    if bounds is None:
        return AttentionRead([], [], [], problems=["kv_indptr shorter than the batch"])
    if int(bounds[0]) != 0:
        problems.append("kv_indptr does not start at 0")
    prefixes: list[torch.Tensor] = []
    for entry in range(rows * branches):
        prefix = pointer_read(source.kv_indices, int(bounds[entry]), int(bounds[entry + 1]))
        if prefix is None:
            problems.append("kv_indptr points past kv_indices")
            prefix = torch.zeros(0, dtype=torch.long)
        prefixes.append(prefix.long())
    if shape.mode not in EXTEND_MODES:
        firsts = prefixes[::branches]
        per_row = prefixes if branches > 1 else None
        return AttentionRead([1] * rows, [p.numel() for p in firsts], firsts, rows=per_row, problems=problems)
    return _extend_read(source, shape, prefixes, req_to_token, problems)


def _extend_read(
    source: TritonCall, shape: Shape, prefixes: list[torch.Tensor], req_to_token: torch.Tensor, problems: list[str]
) -> AttentionRead:
    rows = len(prefixes)
    qo_indptr = None if source.qo_indptr is None else pointer_read(source.qo_indptr, 0, rows + 1)
    if qo_indptr is None:
        return AttentionRead([], [], [], problems=[*problems, "qo_indptr missing"])
    bounds = [int(v) for v in qo_indptr.tolist()]
    q_lens = [end - start for start, end in zip(bounds, bounds[1:])]
    if source.max_extend_len is None:
        problems.append("max_extend_len missing")
    elif q_lens and source.max_extend_len < max(q_lens):
        problems.append("max_extend_len below the longest query")
    slots = []
    for b, prefix in enumerate(prefixes):
        own = _query_slots(range(bounds[b], bounds[b + 1]), source.seen, shape, req_to_token)
        if own is None:
            problems.append("qo_indptr points past the batch's query rows")
            own = torch.zeros(0, dtype=torch.long)
        slots.append(torch.cat([prefix, own]))
    kv_lens = [s.numel() for s in slots]
    if source.custom_mask is not None:
        problems += _mask_problems(source, shape, q_lens, kv_lens, [p.numel() for p in prefixes])
    return AttentionRead(q_lens, kv_lens, slots, problems=problems)


def _query_slots(query_rows: range, seen: Seen, shape: Shape, req_to_token: torch.Tensor) -> torch.Tensor | None:
    """The KV slots of the batch's query rows: the runner lays out T rows per request, request r's
    row j being its token at ``first_r + j`` (target verify: after the ``seq_lens`` prefix; draft
    extend: the last T of ``seq_lens``)."""
    if seen.req_pool_indices is None or seen.seq_lens is None:
        return None
    width = shape.tokens_per_req
    requests = seen.req_pool_indices.numel()
    found = []
    for row in query_rows:
        request, offset = divmod(row, width)
        if request >= requests or row < 0:
            return None
        first = int(seen.seq_lens[request]) - (width if shape.mode is Mode.DRAFT_EXTEND else 0)
        found.append(int(req_to_token[int(seen.req_pool_indices[request]), first + offset]))
    return torch.tensor(found, dtype=torch.long)


def _mask_problems(
    source: TritonCall, shape: Shape, q_lens: list[int], kv_lens: list[int], prefix_lens: list[int]
) -> list[str]:
    """The tree mask the call reads for each request, from ``mask_indptr``, against the batch's."""
    if source.mask_indptr is None or source.custom_mask is None:
        return ["mask_indptr missing"]
    starts = [int(v) for v in source.mask_indptr[: len(q_lens) + 1].tolist()]
    problems = []
    for b, (q_len, kv_len) in enumerate(zip(q_lens, kv_lens)):
        if starts[b + 1] - starts[b] != q_len * kv_len:
            problems.append("mask_indptr is not the running sum of q_len * kv_len")
            continue
        seen = pointer_read(source.custom_mask, starts[b], starts[b + 1])
        want = tree_mask([prefix_lens[b]], q_len, shape.topk)
        if seen is None or not torch.equal(seen.to(torch.uint8), want):
            problems.append("custom_mask is not the batch's tree mask")
    return list(dict.fromkeys(problems))
