"""The kernels' inputs and the fp32 reference they are judged against.

The KV pool is one buffer of token slots (``[POOL_TOKENS, KV_HEADS, HEAD_DIM]``): each backend's
kernel sees it through its own layout (token slots, or pages of ``page_size`` slots), and the
reference reads it straight from ``req_to_token``, never from the metadata under test.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from probes.demo_backend.checks import attention_metrics, attention_signature, attention_verdict, tolerance_for
from probes.demo_backend.reference import reference_attention
from probes.sglang.fixture import POOL_TOKENS
from probes.sglang.gpu.replayed import Replayed
from tracker.core.verdicts import Outcome

Q_HEADS, KV_HEADS, HEAD_DIM = 8, 2, 128
KV_DTYPE = torch.bfloat16
SM_SCALE = HEAD_DIM**-0.5
WORKSPACE_BYTES = 128 << 20


@dataclass(frozen=True)
class Inputs:
    """Random queries of the batch's true rows and a random KV pool, on ``device``."""

    q: torch.Tensor
    """``[rows, Q_HEADS, HEAD_DIM]``: request b's T query rows at ``b * T``."""
    k: torch.Tensor
    """``[POOL_TOKENS, KV_HEADS, HEAD_DIM]``, one entry per token slot."""
    v: torch.Tensor

    @classmethod
    def draw(cls, rows: int, device: torch.device, seed: int) -> Inputs:
        generator = torch.Generator(device=device).manual_seed(seed)

        def normal(*shape: int) -> torch.Tensor:
            return torch.randn(shape, generator=generator, device=device).to(KV_DTYPE)

        pool = (POOL_TOKENS, KV_HEADS, HEAD_DIM)
        return cls(normal(rows, Q_HEADS, HEAD_DIM), normal(*pool), normal(*pool))

    def paged(self, page_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The pool as NHD pages: ``[POOL_TOKENS // page_size, page_size, KV_HEADS, HEAD_DIM]``."""
        pages = POOL_TOKENS // page_size
        return (
            self.k.view(pages, page_size, KV_HEADS, HEAD_DIM),
            self.v.view(pages, page_size, KV_HEADS, HEAD_DIM),
        )


def reference(replayed: Replayed, inputs: Inputs) -> torch.Tensor:
    """fp32 attention of the batch's true rows: request b's T query tokens are the last T of its
    KV, and see its KV up to themselves."""
    batch, device = replayed.batch, inputs.q.device
    return reference_attention(
        replayed.req_to_token.to(device),
        inputs.k.unsqueeze(2),
        inputs.v.unsqueeze(2),
        batch.req_pool_indices.tolist(),
        batch.kv_lens,
        inputs.q,
        batch.tokens_per_req,
        torch.float32,
    )


@dataclass(frozen=True)
class Judged:
    outcome: Outcome
    metrics: dict[str, float]
    signature: str | None


def judged(out: torch.Tensor, replayed: Replayed, inputs: Inputs) -> Judged:
    """The kernel's rows of the batch's true tokens against the reference."""
    tolerance = tolerance_for("bfloat16")
    metrics = attention_metrics(out[: replayed.rows], reference(replayed, inputs), tolerance)
    return Judged(attention_verdict(metrics, tolerance), metrics, attention_signature(metrics, tolerance))


def on_device(tensors: dict[str, torch.Tensor], device: torch.device) -> dict[str, Any]:
    return {name: t.to(device) for name, t in tensors.items()}
