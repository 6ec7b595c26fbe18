"""The invariant probes of SGLang's attention backends: one per backend and forward mode.

``sglang_<backend>_<mode>`` judges that backend's CUDA-graph metadata for that mode with the
backend-neutral invariant of ``probes.sglang.invariants``; a revision whose backend does not
serve the mode (its era, topk > 1, T != N) is a skip that says why. The table below is the one
place that says which backends and modes are probed. Registering the family imports no torch:
each probe's check lives in ``probes.sglang.judges.invariant_<backend>``, so its code hash
covers its own adapter and the shared judge, not the other backends'.

A backend joins the family with an adapter in ``probes.sglang.backends`` (``ADAPTER``), a line in
``BACKENDS``, and its judge module ``probes.sglang.judges.invariant_<backend>``, whose ``check``
calls :func:`checked` with that adapter. Its CPU kernel versions join ``KNOWN_KERNELS`` of
``probes.sglang.kernels``, the one table the loader substitutes from.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from probes.api import Case, Probe, ProbeContext, ProbeResult
from probes.registry import register

if TYPE_CHECKING:
    from probes.sglang.backends.base import Adapter

DECODE, DRAFT_DECODE, TARGET_VERIFY, DRAFT_EXTEND = "decode", "draft_decode", "target_verify", "draft_extend"

BACKENDS: dict[str, tuple[str, ...]] = {
    "trtllm_mha": (DECODE, DRAFT_DECODE, TARGET_VERIFY, DRAFT_EXTEND),
    "flashinfer": (DECODE, DRAFT_DECODE, TARGET_VERIFY, DRAFT_EXTEND),
    "fa3": (DECODE, DRAFT_DECODE, TARGET_VERIFY, DRAFT_EXTEND),
    "triton": (DECODE, DRAFT_DECODE, TARGET_VERIFY, DRAFT_EXTEND),
}
"""Backend (its adapter in ``probes.sglang.backends``) -> the modes its probes judge."""

PAGES = (16, 1, 64)

CASES: dict[str, tuple[Case, ...]] = {
    DECODE: (
        Case("pages", dict(mode=DECODE, pages=PAGES)),
        Case("no-host-seq-lens", dict(mode=DECODE, pages=(16, 64), host_copy=False)),
    ),
    DRAFT_DECODE: (
        Case("step0", dict(mode=DRAFT_DECODE, pages=PAGES, draft_tokens=4, num_steps=3, step=0)),
        Case("step1", dict(mode=DRAFT_DECODE, pages=PAGES, draft_tokens=4, num_steps=3, step=1)),
        Case("topk2-step1", dict(mode=DRAFT_DECODE, pages=(16, 1), draft_tokens=4, num_steps=3, step=1, topk=2)),
        Case(
            "topk2-step0-small-pages",
            dict(mode=DRAFT_DECODE, pages=(2, 4), draft_tokens=8, num_steps=6, step=0, topk=2),
        ),
    ),
    TARGET_VERIFY: (
        Case("N4-T2", dict(mode=TARGET_VERIFY, pages=PAGES, draft_tokens=4, tokens_per_req=2)),
        Case("N3-T5", dict(mode=TARGET_VERIFY, pages=PAGES, draft_tokens=3, tokens_per_req=5)),
        Case("N4-T4", dict(mode=TARGET_VERIFY, pages=(16,), draft_tokens=4, tokens_per_req=4)),
        Case("topk2-N4", dict(mode=TARGET_VERIFY, pages=(16, 1), draft_tokens=4, tokens_per_req=4, topk=2)),
    ),
    DRAFT_EXTEND: (
        Case("T3", dict(mode=DRAFT_EXTEND, pages=PAGES, draft_tokens=4, tokens_per_req=3)),
        Case("T1", dict(mode=DRAFT_EXTEND, pages=(16,), draft_tokens=4, tokens_per_req=1)),
        Case(
            "topk2-T4",
            dict(mode=DRAFT_EXTEND, pages=(16, 1), draft_tokens=4, tokens_per_req=4, num_steps=2, topk=2),
        ),
    ),
}
"""A mode's cases, the same for every backend: their ids name the shape (N draft tokens, T tokens
per request, the speculative step, topk)."""

DESCRIPTIONS = {
    DECODE: "decode graph replays (padded batches; no host seq_lens where the backend is sync-free)",
    DRAFT_DECODE: "draft-decode graph replays at each speculative step (topk 1 and 2)",
    TARGET_VERIFY: "target-verify graph metadata with T != N and topk 2",
    DRAFT_EXTEND: "draft-extend graph metadata",
}


def revision_module(backend: str) -> str:
    """The SGLang module that defines ``backend`` (its adapter's; importing the adapter loads torch)."""
    adapter: Adapter = importlib.import_module(f"probes.sglang.backends.{backend}").ADAPTER
    return adapter.module


def probe_name(backend: str, mode: str) -> str:
    return f"sglang_{backend}_{mode}"


def _probe(backend: str, mode: str) -> Probe:
    return Probe(
        name=probe_name(backend, mode),
        version=1,
        description=f"SGLang {backend}: {DESCRIPTIONS[mode]}, graph vs eager vs the closed form",
        cases=CASES[mode],
        check=f"probes.sglang.judges.invariant_{backend}:check",
        requires=("torch",),
        deterministic=True,
    )


PROBES = tuple(register(_probe(backend, mode)) for backend, modes in BACKENDS.items() for mode in modes)


def checked(ctx: ProbeContext, params: Mapping[str, Any], adapter: Adapter) -> ProbeResult:
    """One case of a family probe against the revision at ``ctx``."""
    from probes.sglang import invariants
    from probes.sglang.session import guarded

    return guarded(ctx, lambda subject: invariants.judge(subject, params), adapter)
