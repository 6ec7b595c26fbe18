"""SGLang TRTLLM MHA decode CUDA-graph replays vs the closed form and the eager path.

A decode graph is captured once and replayed for new requests whose lengths open new pages, with
full and padded batches; the ``host-lag`` case serves batches whose host copy of ``seq_lens``
trails the device one (overlap scheduling). The check is ``probes.sglang.judges``'s.
"""

from __future__ import annotations

from probes.api import Case, Probe
from probes.registry import register

CASES = (
    Case("pages", dict(pages=(16, 1, 64), host_lag=0)),
    Case("host-lag", dict(pages=(16, 64), host_lag=1)),
)


PROBE = register(
    Probe(
        name="sglang_decode_graph_replay",
        version=1,
        description=(
            "SGLang trtllm_mha decode graph replays (padded batches, lagging host seq_lens)"
            " vs the closed form and the eager path"
        ),
        cases=CASES,
        check="probes.sglang.judges.decode_graph_replay:check",
        requires=("torch",),
        deterministic=True,
    )
)
