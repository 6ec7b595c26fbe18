"""Target-verify CUDA-graph metadata with T != N, after capture and every replay.

A graph is captured for T query tokens per request on a server configured for N draft tokens,
then replayed for new requests. After each replay the graph's metadata must equal both the
eager path's metadata for the same batch and the closed form (q length T, KV lengths
``seq_lens + T``, ...). SGLang's mock runner sets N = T by construction and cannot see a
metadata routine that takes N where it should take T; these cases decouple them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probes.api import ProbeContext, ProbeResult
from probes.demo_backend.checks import metadata_differences
from probes.demo_backend.scenario import expected_page_rows, make_scenario
from tracker.core.verdicts import Outcome

REPLAYS = {
    4: [[10, 37, 3, 100], [200, 1, 64, 15], [33, 34, 35, 36]],
    3: [[17, 300, 64], [5, 129, 40], [90, 91, 7]],
    2: [[50, 9], [1, 250]],
    1: [[70], [15]],
}
"""The prefix lengths of each replay, by batch size."""


def check(ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
    bk = ctx.import_package("backend")
    T, bs = params["tokens_per_req"], params["bs"]
    scn = make_scenario(bk, ctx, page_size=params["page"], draft_tokens=params["draft_tokens"])
    mode = bk.ForwardMode.TARGET_VERIFY
    runner = bk.GraphRunner(scn.backend, mode, sorted({1, bs}), T)
    runner.capture()
    problems: list[str] = []
    failed_replays = 0
    for seq_lens in REPLAYS[bs]:
        kv_lens = [s + T for s in seq_lens]
        req = scn.admit(kv_lens)
        runner.replay(req, scn.forward_batch(mode, req, seq_lens, T).seq_lens, scn.random_q(bs * T))
        pages = expected_page_rows(scn.pool, req, kv_lens)
        graph_diffs = metadata_differences(scn.backend.forward_metadata, q_len=T, kv_lens=kv_lens, page_rows=pages)
        scn.backend.init_forward_metadata(scn.forward_batch(mode, req, seq_lens, T))
        eager_diffs = metadata_differences(scn.backend.forward_metadata, q_len=T, kv_lens=kv_lens, page_rows=pages)
        problems += [f"graph {d}" for d in graph_diffs] + [f"eager {d}" for d in eager_diffs]
        failed_replays += bool(graph_diffs or eager_diffs)
        scn.retire(req)
    metrics = {"replays": float(len(REPLAYS[bs])), "failed_replays": float(failed_replays)}
    if not problems:
        return ProbeResult(Outcome.PASS, metrics)
    return ProbeResult(Outcome.FAIL, metrics, signature=", ".join(dict.fromkeys(problems)))
