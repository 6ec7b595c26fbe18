"""SGLang target-verify attention under a real CUDA graph, with the revision's replayed metadata.

FlashInfer's XQA decode kernel, the Hopper kin of SGLang's TRTLLM-gen call, runs with the
revision's target-verify graph metadata for a fixed scenario under a ``torch.cuda.CUDAGraph``;
the rows of the batch's true tokens are compared with an fp32 reference. The check is
``probes.sglang.judges``'s.
"""

from __future__ import annotations

from probes.api import Case, Probe
from probes.registry import register

CASES = (Case("xqa-bs4-T2-N4-p16", dict(kernel="xqa"), cuda_only=True),)


PROBE = register(
    Probe(
        name="sglang_target_verify_attention",
        version=1,
        description=(
            "SGLang target-verify attention (FlashInfer XQA) under a CUDA graph with the revision's metadata"
            " vs an fp32 reference"
        ),
        cases=CASES,
        check="probes.sglang.judges.target_verify_attention:check",
        requires=("torch",),
    )
)
