"""The sliding-window page table vs its closed form, eagerly and after draft-extend graph replays;
the check is ``probes.demo_backend.judges.swa_page_table``."""

from __future__ import annotations

from probes.api import Case, Probe
from probes.registry import register

CASES = (
    Case("p1-w32", dict(page=1, window=32, bs=4)),
    Case("p16-w64", dict(page=16, window=64, bs=4)),
    Case("p64-w128", dict(page=64, window=128, bs=3)),
)

PROBE = register(
    Probe(
        name="swa_page_table",
        version=1,
        description="sliding-window page table vs its closed form, eager and after graph replays",
        cases=CASES,
        check="probes.demo_backend.judges.swa_page_table:check",
        requires=("torch",),
    )
)
