"""The invariant every backend's CUDA-graph metadata must keep, judged for one mode.

What a captured graph's attention call reads after a replay must equal what the same backend's
eager path computes for the same batch, and both must equal the batch's closed form: each live
request's query length, KV length, and the KV slots of those tokens, read in order. It is judged
right after capture (the scalars a graph bakes in), after replays for new requests whose lengths
sit at page boundaries, with full and padded batches, and where asked with no host copy of
``seq_lens`` at all, as SGLang's sync-free runner hands a backend that declares
``needs_cpu_seq_lens = False`` (a host copy that trails the device one is not modelled). A
revision without the mode is a skip with the reason, never good; one whose eager path gives every
request N tokens where the batch has T != N predates T != N, and is a skip too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from probes.api import ProbeResult
from probes.demo_backend.checks import field_difference
from probes.sglang import fixture
from probes.sglang.backends.base import AttentionRead, Mode, Shape
from probes.sglang.checks import Expected, differences, join
from probes.sglang.fixture import Batch, Pool, VerifyInput
from probes.sglang.graph import CapturedGraph, StaticBatch
from probes.sglang.session import UNSUPPORTED, Subject
from tracker.core.verdicts import Outcome

BATCH_SIZES = (4, 3, 4, 2)
"""Live batch sizes of the replays on a graph of 4: full and padded batches."""
GRAPH_BS = 4


def shape_of(params: Mapping[str, Any], page: int) -> Shape:
    return Shape(
        mode=Mode(params["mode"]),
        page_size=page,
        bs=GRAPH_BS,
        draft_tokens=params.get("draft_tokens", 0),
        tokens_per_req=params.get("tokens_per_req", 1),
        topk=params.get("topk", 1),
        num_steps=params.get("num_steps", 1),
        step=params.get("step", 0),
        host_copy=params.get("host_copy", True),
    )


def judge(subject: Subject, params: Mapping[str, Any]) -> ProbeResult:
    """The invariant for ``params["mode"]`` at each of ``params["pages"]`` page sizes."""
    problems: list[str] = []
    replays = failed = 0
    for page in params["pages"]:
        shape = shape_of(params, page)
        support = subject.adapter.supports(subject.backend_module, subject.era, shape)
        if not support.ok:
            return ProbeResult(Outcome.SKIP, signature=f"{UNSUPPORTED}: {support.reason}")
        outcome = _one_page_size(subject, shape)
        if isinstance(outcome, ProbeResult):
            return outcome
        problems += outcome[0]
        replays, failed = replays + outcome[1], failed + outcome[2]
    metrics = {"replays": float(replays), "failed_replays": float(failed)}
    if not problems:
        return ProbeResult(Outcome.PASS, metrics)
    return ProbeResult(Outcome.FAIL, metrics, signature=join(problems))


@dataclass
class Graphed:
    """A backend of the revision with one graph captured for ``shape``."""

    subject: Subject
    shape: Shape
    pool: Pool
    backend: Any
    runner: CapturedGraph
    baked: Any = None

    def capture(self) -> AttentionRead:
        _bind(self.runner.static.spec_info, [self.runner.static.fill_value] * self.shape.bs)
        self.runner.capture()
        self.baked = self.subject.adapter.bake(self.backend, self.shape)
        return self.subject.adapter.read(self.baked, self.shape, self.shape.bs, self.pool)

    def replay(self, batch: Batch) -> AttentionRead:
        _bind(self.runner.static.spec_info, batch.seq_lens)
        self.runner.replay(batch)
        return self.subject.adapter.read(self.baked, self.shape, batch.size, self.pool)

    def eager(self, batch: Batch) -> AttentionRead:
        adapter = self.subject.adapter
        forward_mode, spec_info = self.runner.static.forward_mode, self.runner.static.spec_info
        extend = self.shape.mode is Mode.DRAFT_EXTEND
        _bind(spec_info, batch.seq_lens)
        self.backend.init_forward_metadata(fixture.eager_batch(batch, forward_mode, spec_info, self.backend, extend))
        return adapter.read(adapter.bake(self.backend, self.shape), self.shape, batch.size, self.pool)


def _bind(spec_info: Any, seq_lens: list[int]) -> None:
    """Lay out the spec-info's per-batch part (a draft tree's mask) for requests of ``seq_lens``."""
    if isinstance(spec_info, VerifyInput):
        spec_info.bind(seq_lens)


def graphed(subject: Subject, shape: Shape) -> Graphed:
    generator = torch.Generator().manual_seed(subject.seed)
    pool = Pool(shape.page_size, generator)
    adapter = subject.adapter
    backend = adapter.make(subject.backend_module, pool, shape)
    forward_mode = forward_mode_of(subject.forward_mode, shape.mode)
    spec_info = adapter.spec_info(subject.backend_module, shape, None)
    if isinstance(spec_info, VerifyInput) and shape.topk > 1:
        spec_info.tree = fixture.draft_tree(shape.draft_tokens, generator)
    fill = int(backend.get_cuda_graph_seq_len_fill_value())
    static = StaticBatch(shape.bs, tokens_per_row(shape), fill, forward_mode, spec_info, shape.host_copy)
    return Graphed(subject, shape, pool, backend, CapturedGraph(backend, subject.era.api or "", static))


def tokens_per_row(shape: Shape) -> int:
    """Tokens a request writes in one step: a topk > 1 draft allocates every branch's steps."""
    if shape.mode is Mode.DRAFT_DECODE and shape.topk > 1:
        return shape.topk * shape.num_steps
    return shape.tokens_per_req


def forward_mode_of(modes: Any, mode: Mode) -> Any:
    if mode in (Mode.DECODE, Mode.DRAFT_DECODE):
        return modes.DECODE
    if mode is Mode.TARGET_VERIFY:
        return modes.TARGET_VERIFY
    return getattr(modes, "DRAFT_EXTEND_V2", None) or modes.DRAFT_EXTEND


def admit(pool: Pool, shape: Shape, lengths: list[int], tree: torch.Tensor | None = None) -> Batch:
    """Fresh requests of ``shape.mode`` whose ``seq_lens`` are ``lengths`` (target verify of a
    draft ``tree`` at topk > 1)."""
    if shape.mode is Mode.TARGET_VERIFY and tree is not None:
        return fixture.admit_verify_tree(pool, lengths, tree)
    if shape.mode is Mode.TARGET_VERIFY:
        return fixture.admit_verify(pool, lengths, shape.tokens_per_req)
    if shape.mode is Mode.DECODE:
        return fixture.admit_decode(pool, lengths, shape.host_copy)
    if shape.mode is Mode.DRAFT_DECODE and shape.topk > 1:
        return fixture.admit_draft_tree(pool, lengths, shape.topk, shape.num_steps, shape.step)
    if shape.mode is Mode.DRAFT_DECODE:
        return fixture.admit_draft_decode(pool, lengths, shape.step)
    return fixture.admit_draft_extend(pool, lengths, shape.tokens_per_req)


def lengths(shape: Shape, size: int, generator: torch.Generator) -> list[int]:
    """``seq_lens`` whose true KV length ends a page exactly while a length off by the mode's
    likeliest error (N for T, the step, the extension) needs one page more, or the reverse."""
    page = shape.page_size
    if shape.mode is Mode.TARGET_VERIFY:
        T, N = shape.tokens_per_req, shape.draft_tokens
        return fixture.crossing_prefixes(page, min(T, N), max(T, N), size, generator)
    if shape.mode is Mode.DRAFT_DECODE:
        return fixture.crossing_prefixes(page, shape.step + 1, shape.step + 2, size, generator)
    starts = fixture.page_start_lengths(page, size, generator)
    return [s + shape.tokens_per_req - 1 for s in starts] if shape.mode is Mode.DRAFT_EXTEND else starts


def _one_page_size(subject: Subject, shape: Shape) -> tuple[list[str], int, int] | ProbeResult:
    backend_class = getattr(subject.backend_module, subject.adapter.backend_class)
    if not shape.host_copy and getattr(backend_class, "needs_cpu_seq_lens", True):
        return ProbeResult(
            Outcome.SKIP,
            signature="the backend does not declare needs_cpu_seq_lens = False: the runner hands it a host seq_lens",
        )
    serving = graphed(subject, shape)
    baked = serving.capture()
    problems = []
    if shape.mode in (Mode.TARGET_VERIFY, Mode.DRAFT_EXTEND) and baked.q_lens:
        wrong = field_difference("q_len", baked.q_lens[0], shape.tokens_per_req)
        problems += [f"capture {wrong}"] if wrong else []
    generator = torch.Generator().manual_seed(subject.seed + shape.page_size)
    failed = 0
    for size in BATCH_SIZES:
        tree = getattr(serving.runner.static.spec_info, "tree", None)
        batch = admit(serving.pool, shape, lengths(shape, size, generator), tree)
        want = Expected.of(serving.pool, batch)
        graph, eager = serving.replay(batch), serving.eager(batch)
        if _predates_t_ne_n(shape, graph, eager, batch):
            return _unsupported_t(shape)
        found = differences("graph", graph, want) + differences("eager", eager, want)
        problems += found
        failed += bool(found)
    return problems, len(BATCH_SIZES), failed


def _predates_t_ne_n(shape: Shape, graph: AttentionRead, eager: AttentionRead, batch: Batch) -> bool:
    """The eager path itself gives every request N tokens for a batch of T != N, and the graph
    agrees: the revision cannot serve T != N at all."""
    T, N = shape.tokens_per_req, shape.draft_tokens
    if shape.mode is not Mode.TARGET_VERIFY or T == N:
        return False
    n_wide = [s + N for s in batch.seq_lens]
    eager_n = eager.kv_lens[: batch.size] == n_wide or set(eager.q_lens[: batch.size]) == {N}
    return eager_n and (graph.q_lens[: batch.size], graph.kv_lens[: batch.size]) == (
        eager.q_lens[: batch.size],
        eager.kv_lens[: batch.size],
    )


def _unsupported_t(shape: Shape) -> ProbeResult:
    T, N = shape.tokens_per_req, shape.draft_tokens
    return ProbeResult(
        Outcome.SKIP,
        signature=f"{UNSUPPORTED}: the eager path gives every request N={N} tokens, not the batch's T={T}: "
        "the backend does not serve T != N",
    )
