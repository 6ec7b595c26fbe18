"""SGLang TRTLLM MHA target-verify CUDA-graph metadata with T != N, after capture and replays.

The backend is configured for N draft tokens; the graph is captured for batches of T tokens per
request and replayed for new requests, some batches padded. What the graph's attention call reads
must equal the closed form (q length T, KV ``seq_lens + T``, the pages of those KV lengths), and
the eager path of the same revision is judged the same way (``probes.sglang.judges``).
"""

from __future__ import annotations

from probes.api import Case, Probe
from probes.registry import register


def _case(draft_tokens: int, tokens_per_req: int, pages: tuple[int, ...]) -> Case:
    return Case(
        f"N{draft_tokens}-T{tokens_per_req}",
        dict(draft_tokens=draft_tokens, tokens_per_req=tokens_per_req, pages=pages),
    )


CASES = (
    _case(4, 2, (16, 1, 64)),
    _case(3, 5, (16, 1, 64)),
    _case(4, 4, (16,)),
)


PROBE = register(
    Probe(
        name="sglang_target_verify_metadata",
        version=2,
        description="SGLang trtllm_mha target-verify graph metadata with T != N vs the closed form and the eager path",
        cases=CASES,
        check="probes.sglang.judges.target_verify_metadata:check",
        requires=("torch",),
        deterministic=True,
    )
)
