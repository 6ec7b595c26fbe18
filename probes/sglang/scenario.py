"""The fixed target-verify scenario whose graph metadata the GPU attention probe runs with.

bs = 4 requests with prefixes 10/37/3/100, T = 2 tokens per request on a backend configured for
N = 4 draft tokens, page size 16 (DESIGN.md §1's measurement). The graph is captured, replayed
once for other requests (some revisions go wrong only from the second replay on), then replayed
for the scenario's requests; what the graph's attention call would read is returned, with the
pool it indexes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from probes.api import ProbeContext
from probes.sglang.fixture import POOL_TOKENS
from probes.sglang.session import Subject, open_subject, serve
from probes.sglang.stubs import StubReached

PREFIXES = (10, 37, 3, 100)
TOKENS_PER_REQ = 2
DRAFT_TOKENS = 4
PAGE_SIZE = 16
WARM_PREFIXES = (61, 5, 44, 29)


@dataclass(frozen=True)
class ReplayedMetadata:
    """What the revision's captured target-verify graph reads after the scenario's replay."""

    era: str
    page_size: int
    seq_lens: list[int]
    """The requests' prefixes (without the draft tokens)."""
    kv_lens: list[int]
    """The true KV lengths: prefix + T."""
    tokens_per_req: int
    draft_tokens: int
    q_len: int | None
    """``max_seq_len_q`` as baked into the graph at capture: the kernel's ``q_len_per_req``."""
    cache_seqlens: torch.Tensor
    """[bs] int32, as the graph reads it (the kernel's ``seq_lens``)."""
    page_table: torch.Tensor
    """[bs, max pages] int32, as the graph reads it (the kernel's ``block_tables``)."""
    req_to_token: torch.Tensor
    req_pool_indices: torch.Tensor
    num_pages: int
    """Pages in the pool the page table indexes."""


def replay_scenario(subject: Subject) -> ReplayedMetadata:
    """Run the scenario against an opened revision (within a case); raises StubReached."""
    serving = serve(
        subject,
        mode="target_verify",
        page_size=PAGE_SIZE,
        bs=len(PREFIXES),
        draft_tokens=DRAFT_TOKENS,
        tokens_per_req=TOKENS_PER_REQ,
    )
    serving.capture()
    serving.replay(serving.admit(list(WARM_PREFIXES)))
    batch = serving.admit(list(PREFIXES))
    seen = serving.replay(batch)
    if seen.cache_seqlens is None or seen.page_table is None:
        raise RuntimeError("the revision's target-verify graph metadata has no cache_seqlens or page_table")
    rows = batch.size
    return ReplayedMetadata(
        era=subject.era.label,
        page_size=PAGE_SIZE,
        seq_lens=list(batch.seq_lens),
        kv_lens=list(batch.kv_lens),
        tokens_per_req=TOKENS_PER_REQ,
        draft_tokens=DRAFT_TOKENS,
        q_len=seen.q_len,
        cache_seqlens=seen.cache_seqlens[:rows].clone(),
        page_table=seen.page_table[:rows].clone(),
        req_to_token=serving.pool.req_to_token.clone(),
        req_pool_indices=batch.req_pool_indices.clone(),
        num_pages=POOL_TOKENS // PAGE_SIZE,
    )


def replayed_metadata(ctx: ProbeContext) -> ReplayedMetadata:
    """The scenario's replayed metadata for the revision at ``ctx.root`` (import roots
    ``("python",)``); call it within a case (``probes.loader.revision``). Raises
    RevisionImportError when the revision does not import, StubReached when the metadata path
    needs code only a GPU has."""
    subject = open_subject(ctx)
    try:
        return replay_scenario(subject)
    finally:
        subject.revision.close()


__all__ = ["ReplayedMetadata", "StubReached", "replay_scenario", "replayed_metadata"]
