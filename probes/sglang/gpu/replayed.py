"""The metadata a revision's captured graph hands its attention call, at capture and after a replay.

The revision's backend is made on the CPU through its adapter (``probes.sglang.backends``), a
graph of 4 requests is captured, replayed once for other requests (some revisions go wrong only
from the second replay on), then replayed for the scenario's requests. What the captured call
reads is kept twice: as it was at capture (what a real graph is captured with) and after the
scenario's replay (what the replayed graph reads), with the Python scalars baked at capture.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from probes.sglang import invariants
from probes.sglang.backends.base import Mode, Shape
from probes.sglang.backends.triton_driven import tree_mask
from probes.sglang.fixture import Batch
from probes.sglang.session import Subject

PAGE_SIZE = 16
PREFIXES = (10, 37, 3, 100)
WARM_PREFIXES = (61, 5, 44, 29)
DRAFT_TOKENS = 4
"""N = T: the FA3 and Triton backends give every verify request N tokens (they never served T != N)."""


@dataclass(frozen=True)
class Snapshot:
    """What one attention call reads: its tensors (copies, as they stood) and the scalars it was
    handed."""

    tensors: dict[str, torch.Tensor]
    scalars: dict[str, Any] = field(default_factory=dict)

    def with_tensors(self, **changed: torch.Tensor) -> Snapshot:
        return replace(self, tensors={**self.tensors, **changed})


Extract = Callable[[Any, Any], Snapshot]
"""(the adapter's ``bake`` of the captured call, the backend) -> the call's :class:`Snapshot`."""


@dataclass(frozen=True)
class Replayed:
    """The scenario's batch, its pool, and what the graph's call reads at capture and at replay."""

    era: str
    shape: Shape
    batch: Batch
    req_to_token: torch.Tensor
    captured: Snapshot
    replayed: Snapshot

    @property
    def rows(self) -> int:
        """Query rows of the batch's true tokens."""
        return self.batch.size * self.batch.tokens_per_req


def scenario_shape(mode: Mode) -> Shape:
    if mode is Mode.DECODE:
        return Shape(mode=mode, page_size=PAGE_SIZE, bs=len(PREFIXES))
    return Shape(
        mode=mode, page_size=PAGE_SIZE, bs=len(PREFIXES), draft_tokens=DRAFT_TOKENS, tokens_per_req=DRAFT_TOKENS
    )


def scenario_lengths(shape: Shape, prefixes: tuple[int, ...]) -> list[int]:
    """``seq_lens`` of the requests: decode and draft extend count their own tokens in them."""
    if shape.mode is Mode.TARGET_VERIFY:
        return list(prefixes)
    return [p + shape.tokens_per_req for p in prefixes]


def replay_scenario(subject: Subject, mode: Mode, extract: Extract) -> Replayed:
    """Capture, replay for other requests, replay for the scenario's; raises StubReached."""
    shape = scenario_shape(mode)
    serving = invariants.graphed(subject, shape)
    spec_info = serving.runner.static.spec_info
    _chain_mask(spec_info, shape, [serving.runner.static.fill_value] * shape.bs)
    serving.capture()
    captured = extract(serving.baked, serving.backend)
    for prefixes in (WARM_PREFIXES, PREFIXES):
        lengths = scenario_lengths(shape, prefixes)
        batch = invariants.admit(serving.pool, shape, lengths)
        _chain_mask(spec_info, shape, lengths)
        serving.replay(batch)
    return Replayed(
        subject.era.label,
        shape,
        batch,
        serving.pool.req_to_token.clone(),
        captured,
        extract(serving.baked, serving.backend),
    )


def _chain_mask(spec_info: Any, shape: Shape, seq_lens: list[int]) -> None:
    """A verify batch's spec-info carries its draft chain's mask (each draft token sees the prefix
    and the drafts up to itself), flattened per request as SGLang's EAGLE verify input holds it."""
    if shape.mode is Mode.TARGET_VERIFY and hasattr(spec_info, "custom_mask"):
        spec_info.custom_mask = tree_mask(seq_lens, shape.tokens_per_req, 1).bool()


def frozen(tensors: dict[str, torch.Tensor | None]) -> dict[str, torch.Tensor]:
    """Copies of the tensors that exist: the graph's buffers are rewritten in place later."""
    return {name: t.detach().clone() for name, t in tensors.items() if isinstance(t, torch.Tensor)}
