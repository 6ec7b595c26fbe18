"""Decode graph replays over randomised batches (drawn from the context's seed) vs the closed form
and a reference; the check is ``probes.demo_backend.judges.decode_graph_replay``."""

from __future__ import annotations

from probes.api import Case, Probe
from probes.registry import register

CASES = (
    Case("bs4-p16", dict(bs=4, page=16, replays=4)),
    Case("bs8-p64", dict(bs=8, page=64, replays=4)),
    Case("bs2-p16", dict(bs=2, page=16, replays=3)),
)

PROBE = register(
    Probe(
        name="decode_graph_replay",
        version=1,
        description="decode graph replays over randomised batches vs the closed form and a reference",
        cases=CASES,
        check="probes.demo_backend.judges.decode_graph_replay:check",
        requires=("torch",),
    )
)
