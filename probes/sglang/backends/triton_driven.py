"""SGLang's Triton backend as the graph runner and the scheduler drive it, on the CPU.

:class:`Driven` stands between the probes' graph emulation and the revision's backend, doing what
SGLang's runners do around the backend's own routines: it hands a target-verify batch its live
tree mask, gives a draft-decode batch its positions (one per draft branch), and drives the
multi-step draft backend, whose entry points take a forward batch, through the single-backend
entry points the emulation calls. It also remembers the request rows and ``seq_lens`` of the last
metadata call (the graph's static buffers, or the eager batch's tensors): the K/V of an extend
call's query tokens come from those requests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import torch

from probes.sglang.backends.base import Mode, Shape, Stand
from probes.sglang.fixture import verify_mask
from probes.sglang.graph import call_with


@dataclass
class TritonSpecInput:
    """The spec-info of a speculative batch, with the fields the Triton backend reads over its
    eras: the verify tree mask, a draft-extend batch's extend lengths and accept lengths, and the
    draft KV indices the multi-step draft backend hands each step."""

    mode: Mode
    topk: int
    num_tokens_per_req: int
    draft_token_num: int
    custom_mask: torch.Tensor | None = None
    extend_seq_lens_tensor: torch.Tensor | None = None
    accept_length: torch.Tensor | None = None
    kv_indptr: torch.Tensor | None = None
    kv_indices: torch.Tensor | None = None
    ragged_verify_layout: Any = None

    def is_draft_input(self) -> bool:
        return self.mode is not Mode.TARGET_VERIFY

    def is_verify_input(self) -> bool:
        return self.mode is Mode.TARGET_VERIFY


def spec_input(shape: Shape) -> TritonSpecInput | None:
    """The spec-info a batch of ``shape`` carries (None for plain decode). A draft-extend batch's
    accept lengths vary below its width, as after a real verify."""
    if shape.mode is Mode.DECODE:
        return None
    width = shape.tokens_per_req
    spec = TritonSpecInput(shape.mode, shape.topk, width, shape.draft_tokens)
    if shape.mode is Mode.DRAFT_EXTEND:
        spec.extend_seq_lens_tensor = torch.full((shape.bs,), width, dtype=torch.int32)
        spec.accept_length = (torch.arange(shape.bs, dtype=torch.int32) % width) + 1
    return spec


def tree_mask(prefixes: list[int], draft_tokens: int, topk: int) -> torch.Tensor:
    """The flattened verify mask of requests with ``prefixes``: each of the N draft tokens sees
    the whole prefix and its ancestors in a tree where token j > 0 hangs under (j - 1) // topk
    (a chain at topk 1)."""
    tree = torch.zeros(draft_tokens, draft_tokens, dtype=torch.bool)
    for token in range(draft_tokens):
        ancestor = token
        while True:
            tree[token, ancestor] = True
            if ancestor == 0:
                break
            ancestor = (ancestor - 1) // topk
    return verify_mask(tree, prefixes).to(torch.uint8)


@dataclass
class Seen:
    """The request rows and ``seq_lens`` the last metadata call was handed."""

    req_pool_indices: torch.Tensor | None = None
    seq_lens: torch.Tensor | None = None


@dataclass
class Driven(Stand):
    """The revision's backend (or, for draft decode, its multi-step draft backend and the
    sub-backend of ``shape.step``) behind the entry points the graph emulation calls."""

    backend: Any
    shape: Shape
    req_to_token: torch.Tensor
    draft: Any = None
    """The multi-step draft backend, for draft decode."""
    seen: Seen = field(default_factory=Seen)

    def init_forward_metadata(self, forward_batch: Any) -> None:
        batch = self._prepared(forward_batch)
        (self.draft or self.backend).init_forward_metadata(batch)

    def init_forward_metadata_capture_cuda_graph(
        self,
        bs: int,
        num_tokens: int,
        req_pool_indices: torch.Tensor,
        seq_lens: torch.Tensor,
        encoder_lens: Any,
        forward_mode: Any,
        spec_info: Any,
    ) -> None:
        arguments = dict(
            bs=bs,
            num_tokens=num_tokens,
            req_pool_indices=req_pool_indices,
            seq_lens=seq_lens,
            encoder_lens=encoder_lens,
            forward_mode=forward_mode,
            spec_info=spec_info,
        )
        self._live(spec_info, req_pool_indices, seq_lens)
        if self.draft is None:
            call_with(self.backend.init_forward_metadata_capture_cuda_graph, **arguments)
            return
        self.draft.init_forward_metadata_capture_cuda_graph(self._draft_batch(arguments))

    def init_forward_metadata_replay_cuda_graph(
        self,
        bs: int,
        req_pool_indices: torch.Tensor,
        seq_lens: torch.Tensor,
        seq_lens_sum: int,
        encoder_lens: Any,
        forward_mode: Any,
        spec_info: Any,
        seq_lens_cpu: torch.Tensor | None = None,
    ) -> None:
        arguments = dict(
            bs=bs,
            req_pool_indices=req_pool_indices,
            seq_lens=seq_lens,
            seq_lens_sum=seq_lens_sum,
            encoder_lens=encoder_lens,
            forward_mode=forward_mode,
            spec_info=spec_info,
            seq_lens_cpu=seq_lens_cpu,
        )
        self._live(spec_info, req_pool_indices, seq_lens)
        if self.draft is None:
            call_with(self.backend.init_forward_metadata_replay_cuda_graph, **arguments)
            return
        call_with(self.draft.init_forward_metadata_replay_cuda_graph, forward_batch=self._draft_batch(arguments), bs=bs)

    def init_forward_metadata_out_graph(self, forward_batch: Any, in_capture: bool = False) -> None:
        batch = self._prepared(forward_batch)
        (self.draft or self.backend).init_forward_metadata_out_graph(batch, in_capture=in_capture)

    def init_forward_metadata_in_graph(self, forward_batch: Any) -> None:
        (self.draft or self.backend).init_forward_metadata_in_graph(self._prepared(forward_batch))

    def _live(self, spec_info: Any, req_pool_indices: torch.Tensor, seq_lens: torch.Tensor) -> None:
        """Remember the call's requests; a verify batch gets the tree mask of its requests (T rows each)."""
        self.seen = Seen(req_pool_indices, seq_lens)
        if self.shape.mode is Mode.TARGET_VERIFY and spec_info is not None:
            prefixes = [int(s) for s in seq_lens.tolist()]
            spec_info.custom_mask = tree_mask(prefixes, self.shape.tokens_per_req, self.shape.topk)

    def _prepared(self, forward_batch: Any) -> Any:
        """``forward_batch`` with what SGLang's runners put in it for this mode."""
        batch = SimpleNamespace(**vars(forward_batch))
        batch.req_to_token_pool = self.backend.req_to_token_pool
        self._live(batch.spec_info, batch.req_pool_indices, batch.seq_lens)
        if self.draft is not None:
            batch.positions = batch.seq_lens.repeat_interleave(self.shape.topk).to(torch.int64)
        return batch

    def _draft_batch(self, arguments: dict[str, Any]) -> SimpleNamespace:
        """The forward batch the draft runner hands the multi-step backend (capture/replay era)."""
        seq_lens = arguments["seq_lens"]
        bs = arguments["bs"]
        seq_lens_sum = arguments.get("seq_lens_sum")
        return SimpleNamespace(
            batch_size=bs,
            forward_mode=arguments["forward_mode"],
            req_pool_indices=arguments["req_pool_indices"],
            seq_lens=seq_lens,
            seq_lens_sum=int(seq_lens[:bs].sum()) if seq_lens_sum is None else seq_lens_sum,
            seq_lens_cpu=arguments.get("seq_lens_cpu"),
            positions=seq_lens.repeat_interleave(self.shape.topk).to(torch.int64),
            spec_info=arguments["spec_info"],
            req_to_token_pool=self.backend.req_to_token_pool,
            encoder_lens=None,
        )
