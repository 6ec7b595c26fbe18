"""The sliding-window page table: each request's window pages, translated to the SWA pool.

For request b with KV length L, the pages holding tokens max(0, L - window) .. L - 1 must map,
through ``full_to_swa_page``, from the full page table. Checked on the eager path and after each
draft-extend graph replay (T extend tokens per request, already counted in ``seq_lens``).
"""

from __future__ import annotations

from typing import Any, Mapping

import torch

from probes.api import Case, Outcome, Probe, ProbeContext, ProbeResult
from probes.demo_backend.checks import page_table_difference
from probes.registry import register
from probes.demo_backend.scenario import expected_page_rows, make_scenario

REPLAYS = [[37, 100, 5, 71], [200, 18, 129, 50], [9, 260, 33, 94]]
EXTEND_TOKENS = 2

CASES = (
    Case("p1-w32", dict(page=1, window=32, bs=4)),
    Case("p16-w64", dict(page=16, window=64, bs=4)),
    Case("p64-w128", dict(page=64, window=128, bs=3)),
)


def window_rows(pool: Any, req_pool_indices: torch.Tensor, kv_lens: list[int], window: int) -> tuple[list[int], list[torch.Tensor]]:
    """First window page and the expected SWA page ids from it to the last page, per request."""
    full_rows = expected_page_rows(pool, req_pool_indices, kv_lens)
    firsts = [max(0, kv_len - window) // pool.page_size for kv_len in kv_lens]
    mapping = pool.full_to_swa_page.cpu().long()
    return firsts, [mapping[row[first:]] for row, first in zip(full_rows, firsts)]


def swa_difference(label: str, swa_page_table: torch.Tensor, firsts: list[int], rows: list[torch.Tensor]) -> str | None:
    table = swa_page_table.cpu().long()
    shifted = torch.zeros(table.shape, dtype=torch.long)
    for b, first in enumerate(firsts):
        width = table.shape[1] - first
        shifted[b, :width] = table[b, first:]
    return page_table_difference(f"{label} swa_page_table", shifted, rows)


def check(ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
    bk = ctx.import_package("backend")
    bs, window = params["bs"], params["window"]
    scn = make_scenario(bk, ctx, page_size=params["page"], sliding_window=window)
    mode, T = bk.ForwardMode.DRAFT_EXTEND, EXTEND_TOKENS
    runner = bk.GraphRunner(scn.backend, mode, [bs], T)
    runner.capture()
    problems: list[str | None] = []
    for seq_lens in (lens[:bs] for lens in REPLAYS):
        req = scn.admit(seq_lens)
        firsts, rows = window_rows(scn.pool, req, seq_lens, window)
        runner.replay(req, scn.forward_batch(mode, req, seq_lens, T).seq_lens, scn.random_q(bs * T))
        problems.append(swa_difference("graph", scn.backend.forward_metadata.swa_page_table, firsts, rows))
        scn.backend.init_forward_metadata(scn.forward_batch(mode, req, seq_lens, T))
        problems.append(swa_difference("eager", scn.backend.forward_metadata.swa_page_table, firsts, rows))
        scn.retire(req)
    found = [p for p in dict.fromkeys(problems) if p is not None]
    metrics = {"checks": float(len(problems)), "failed_checks": float(sum(p is not None for p in problems))}
    if not found:
        return ProbeResult(Outcome.PASS, metrics)
    return ProbeResult(Outcome.FAIL, metrics, signature=", ".join(found))


PROBE = register(
    Probe(
        name="swa_page_table",
        version=1,
        description="sliding-window page table vs its closed form, eager and after graph replays",
        cases=CASES,
        check=check,
    )
)
