"""One case against one SGLang revision: its modules, its era, a backend and a graph over it, and
the outcome when the case reaches code that only a GPU has."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import torch

from probes.api import ProbeContext, ProbeResult
from probes.sglang import fixture
from probes.sglang.backends.base import Adapter, Era
from probes.sglang.backends.trtllm_mha import ADAPTER as TRTLLM_MHA
from probes.sglang.fixture import Batch, Pool, VerifyInput
from probes.sglang.graph import CapturedGraph, MetadataView, StaticBatch, read_metadata
from probes.sglang.loader import FORWARD_BATCH_MODULE, LoadedRevision, load_sglang
from probes.sglang.stubs import StubReached
from tracker.core.verdicts import Outcome

SWA_MODULE = "sglang.srt.mem_cache.swa_memory_pool"
UNSUPPORTED = "unsupported"


@dataclass
class Subject:
    """The revision's modules one case judges."""

    revision: LoadedRevision
    backend_module: ModuleType
    forward_mode: Any
    era: Era
    seed: int
    adapter: Adapter = TRTLLM_MHA

    def swa_module(self) -> ModuleType:
        return self.revision.module(SWA_MODULE)


def open_subject(ctx: ProbeContext, adapter: Adapter = TRTLLM_MHA) -> Subject:
    revision = load_sglang(ctx)
    backend_module = revision.module(adapter.module)
    forward_mode = revision.module(FORWARD_BATCH_MODULE).ForwardMode
    return Subject(revision, backend_module, forward_mode, adapter.era(backend_module), ctx.seed, adapter)


def guarded(ctx: ProbeContext, judge: Callable[[Subject], ProbeResult], adapter: Adapter = TRTLLM_MHA) -> ProbeResult:
    """``judge`` the revision; a stub it reaches makes the case untestable (ERROR), whatever the
    revision's code did with the exception. The ledger goes into the result either way."""
    revision = load_sglang(ctx)
    try:
        result = _judged(ctx, revision, judge, adapter)
    finally:
        revision.close()
    result.metrics.update(revision.ledger.metrics())
    result.detail = "\n".join(filter(None, [result.detail, revision.ledger.summary()]))
    return result


def _judged(
    ctx: ProbeContext, revision: LoadedRevision, judge: Callable[[Subject], ProbeResult], adapter: Adapter
) -> ProbeResult:
    if not revision.has_source(adapter.module):
        return ProbeResult(Outcome.SKIP, signature=f"{UNSUPPORTED}: the revision has no {adapter.module}")
    try:
        subject = open_subject(ctx, adapter)
        if subject.era.api is None:
            result = ProbeResult(Outcome.SKIP, signature=f"{UNSUPPORTED}: {subject.era.describe()}")
        else:
            result = judge(subject)
            result.detail = "\n".join(filter(None, [subject.era.describe(), result.detail]))
    except StubReached as reached:
        result = _stub_reached(reached.name)
    except Exception:
        if not revision.ledger.reached:
            raise
        result = _stub_reached(revision.ledger.reached[0])
    if revision.ledger.reached and result.signature != f"stub reached: {revision.ledger.reached[0]}":
        result = _stub_reached(revision.ledger.reached[0])
    return result


def _stub_reached(name: str) -> ProbeResult:
    return ProbeResult(Outcome.ERROR, signature=f"stub reached: {name}")


@dataclass
class Serving:
    """A backend of the revision with one captured graph, and the pool its requests live in."""

    subject: Subject
    pool: Pool
    backend: Any
    runner: CapturedGraph
    forward_mode: Any
    spec_info: Any
    tokens_per_req: int
    baked: MetadataView = field(init=False)

    def capture(self) -> MetadataView:
        self.baked = self.runner.capture()
        return self.baked

    def replay(self, batch: Batch) -> MetadataView:
        return self.runner.replay(batch)

    def eager(self, batch: Batch) -> MetadataView:
        """The eager path's metadata for ``batch`` (no graph)."""
        self.backend.init_forward_metadata(fixture.eager_batch(batch, self.forward_mode, self.spec_info, self.backend))
        return read_metadata(self.backend.forward_metadata)

    def admit(self, seq_lens: list[int]) -> Batch:
        if self.tokens_per_req > 1:
            return fixture.admit_verify(self.pool, seq_lens, self.tokens_per_req)
        return fixture.admit_decode(self.pool, seq_lens)


def serve(
    subject: Subject,
    *,
    mode: str,
    page_size: int,
    bs: int,
    draft_tokens: int,
    tokens_per_req: int = 1,
    swa: bool = False,
) -> Serving:
    """A backend configured for ``draft_tokens`` (N) and a graph captured for ``bs`` requests of
    ``tokens_per_req`` (T) tokens in ``mode`` ("target_verify" or "decode")."""
    generator = torch.Generator().manual_seed(subject.seed)
    pool = Pool(page_size, generator)
    swa_pool = fixture.make_swa_pool(subject.swa_module(), fixture.swa_mapping(page_size, generator)) if swa else None
    backend = fixture.make_backend(
        subject.backend_module,
        pool,
        draft_tokens=draft_tokens,
        max_bs=bs,
        max_tokens_per_req=max(tokens_per_req, draft_tokens),
        swa=swa_pool,
    )
    verify = mode == "target_verify"
    forward_mode = subject.forward_mode.TARGET_VERIFY if verify else subject.forward_mode.DECODE
    spec_info = VerifyInput(tokens_per_req) if verify else None
    fill = int(backend.get_cuda_graph_seq_len_fill_value())
    static = StaticBatch(bs, tokens_per_req, fill, forward_mode, spec_info)
    runner = CapturedGraph(backend, subject.era.api or "", static)
    return Serving(subject, pool, backend, runner, forward_mode, spec_info, tokens_per_req)
