"""The sliding-window page table: each request's window pages, translated to the SWA pool.

For request b with KV length L, the pages holding tokens max(0, L - window) .. L - 1 must map,
through ``full_to_swa_page``, from the full page table. Checked on the eager path and after each
draft-extend graph replay (T extend tokens per request, already counted in ``seq_lens``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probes.api import ProbeContext, ProbeResult
from probes.demo_backend.checks import swa_table_difference
from probes.demo_backend.scenario import make_scenario, window_page_rows
from tracker.core.verdicts import Outcome

REPLAYS = [[37, 100, 5, 71], [200, 18, 129, 50], [9, 260, 33, 94]]
EXTEND_TOKENS = 2


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
        firsts, rows = window_page_rows(scn.pool, req, seq_lens, window)
        runner.replay(req, scn.forward_batch(mode, req, seq_lens, T).seq_lens, scn.random_q(bs * T))
        problems.append(swa_table_difference("graph", scn.backend.forward_metadata.swa_page_table, firsts, rows))
        scn.backend.init_forward_metadata(scn.forward_batch(mode, req, seq_lens, T))
        problems.append(swa_table_difference("eager", scn.backend.forward_metadata.swa_page_table, firsts, rows))
        scn.retire(req)
    found = [p for p in dict.fromkeys(problems) if p is not None]
    metrics = {"checks": float(len(problems)), "failed_checks": float(sum(p is not None for p in problems))}
    if not found:
        return ProbeResult(Outcome.PASS, metrics)
    return ProbeResult(Outcome.FAIL, metrics, signature=", ".join(found))
