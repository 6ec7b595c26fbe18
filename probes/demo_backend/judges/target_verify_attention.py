"""Target-verify attention output through the graph runner vs a higher-precision reference.

This is the bug's consequence: with wrong metadata a replay computes attention of the wrong rows
over the wrong KV, silently (no exception, no NaN). The output of every replay is compared with
a reference computed straight from ``req_to_token`` (fp64 on the CPU, fp32 on the GPU).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probes.api import ProbeContext, ProbeResult
from probes.demo_backend.checks import attention_metrics, attention_signature, attention_verdict, tolerance_for
from probes.demo_backend.scenario import make_scenario

PREFIXES = {
    4: [[10, 37, 3, 100], [200, 1, 64, 15]],
    3: [[17, 300, 64], [5, 129, 40]],
}
"""The prefix lengths of each replay, by batch size."""


def check(ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
    bk = ctx.import_package("backend")
    T, bs = params["tokens_per_req"], params["bs"]
    scn = make_scenario(bk, ctx, page_size=params["page"], draft_tokens=params["draft_tokens"], kernel=params["kernel"])
    mode = bk.ForwardMode.TARGET_VERIFY
    runner = bk.GraphRunner(scn.backend, mode, [bs], T)
    runner.capture()
    tolerance = tolerance_for(ctx.dtype)
    worst: dict[str, float] = {}
    for seq_lens in PREFIXES[bs]:
        kv_lens = [s + T for s in seq_lens]
        req = scn.admit(kv_lens)
        q = scn.random_q(bs * T)
        out = runner.replay(req, scn.forward_batch(mode, req, seq_lens, T).seq_lens, q)
        metrics = attention_metrics(out, scn.reference(req, kv_lens, q, T), tolerance)
        worst = {k: max(worst.get(k, v), v) for k, v in metrics.items()}
        scn.retire(req)
    outcome = attention_verdict(worst, tolerance)
    return ProbeResult(outcome, worst, signature=attention_signature(worst, tolerance))
