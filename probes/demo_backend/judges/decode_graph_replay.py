"""Decode graph replay: metadata and output of each replay vs the closed form and a reference.

Replays draw fresh batches (lengths uniform in a range) from the context's seed, the way live
traffic varies, so a bug that only some batches trigger fails some executions and not others.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probes.api import ProbeContext, ProbeResult
from probes.demo_backend.checks import attention_metrics, attention_verdict, metadata_differences, tolerance_for
from probes.demo_backend.scenario import expected_page_rows, make_scenario
from tracker.core.verdicts import Outcome

MAX_SEQ_LEN = 400


def check(ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
    bk = ctx.import_package("backend")
    bs = params["bs"]
    scn = make_scenario(bk, ctx, page_size=params["page"])
    mode = bk.ForwardMode.DECODE
    runner = bk.GraphRunner(scn.backend, mode, [bs])
    runner.capture()
    tolerance = tolerance_for(ctx.dtype)
    problems: list[str] = []
    failed_replays = 0
    worst: dict[str, float] = {}
    for _ in range(params["replays"]):
        seq_lens = scn.random_lengths(bs, 1, MAX_SEQ_LEN)
        req = scn.admit(seq_lens)
        q = scn.random_q(bs)
        out = runner.replay(req, scn.forward_batch(mode, req, seq_lens, 1).seq_lens, q)
        pages = expected_page_rows(scn.pool, req, seq_lens)
        diffs = metadata_differences(scn.backend.forward_metadata, q_len=1, kv_lens=seq_lens, page_rows=pages)
        metrics = attention_metrics(out, scn.reference(req, seq_lens, q, 1), tolerance)
        worst = {k: max(worst.get(k, v), v) for k, v in metrics.items()}
        if attention_verdict(metrics, tolerance) is Outcome.FAIL:
            diffs.append("decode output off reference")
        problems += diffs
        failed_replays += bool(diffs)
        scn.retire(req)
    metrics = {**worst, "replays": float(params["replays"]), "failed_replays": float(failed_replays)}
    if not problems:
        return ProbeResult(Outcome.PASS, metrics)
    return ProbeResult(Outcome.FAIL, metrics, signature=", ".join(dict.fromkeys(problems)))
