"""Target-verify attention output under graph replay vs an fp32/fp64 reference; the check is
``probes.demo_backend.judges.target_verify_attention``."""

from __future__ import annotations

from probes.api import Case, Probe
from probes.registry import register


def _case(draft_tokens: int, tokens_per_req: int, bs: int, page: int, kernel: str = "auto") -> Case:
    suffix = "" if kernel == "auto" else f"-{kernel}"
    return Case(
        f"N{draft_tokens}-T{tokens_per_req}-bs{bs}-p{page}{suffix}",
        dict(draft_tokens=draft_tokens, tokens_per_req=tokens_per_req, bs=bs, page=page, kernel=kernel),
        cuda_only=kernel != "auto",
    )


CASES = (
    _case(4, 2, 4, 16),
    _case(3, 5, 3, 64),
    _case(4, 2, 4, 16, kernel="fa2"),
    _case(3, 5, 3, 1, kernel="fa2"),
)

PROBE = register(
    Probe(
        name="target_verify_attention",
        version=1,
        description="target-verify attention output under graph replay vs an fp32/fp64 reference",
        cases=CASES,
        check="probes.demo_backend.judges.target_verify_attention:check",
        requires=("torch",),
    )
)
