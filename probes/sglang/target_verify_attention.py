"""SGLang target-verify attention under a real CUDA graph, with the revision's replayed metadata.

FlashInfer's XQA decode kernel, the Hopper kin of SGLang's TRTLLM-gen call, runs with the
revision's target-verify graph metadata for a fixed scenario under a ``torch.cuda.CUDAGraph``;
the rows of the batch's true tokens are compared with an fp32 reference. The judge is
``probes.sglang.judges``'s.
"""

from __future__ import annotations

from typing import Any, Mapping

from probes.api import Case, Probe, ProbeContext, ProbeResult
from probes.registry import register

CASES = (Case("xqa-bs4-T2-N4-p16", dict(kernel="xqa"), cuda_only=True),)


def check(ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
    from probes.sglang.judges.target_verify_attention import check as judged

    return judged(ctx, params)


PROBE = register(
    Probe(
        name="sglang_target_verify_attention",
        version=1,
        description="SGLang target-verify attention (FlashInfer XQA) under a CUDA graph with the revision's metadata vs an fp32 reference",
        cases=CASES,
        check=check,
    )
)
