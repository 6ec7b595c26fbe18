"""Target-verify CUDA-graph metadata with T != N, after capture and every replay, against the
eager path and the closed form; the check is ``probes.demo_backend.judges.target_verify_metadata``."""

from __future__ import annotations

from probes.api import Case, Probe
from probes.registry import register


def _case(draft_tokens: int, tokens_per_req: int, bs: int, page: int) -> Case:
    return Case(
        f"N{draft_tokens}-T{tokens_per_req}-bs{bs}-p{page}",
        dict(draft_tokens=draft_tokens, tokens_per_req=tokens_per_req, bs=bs, page=page),
    )


CASES = (
    _case(4, 2, 4, 16),
    _case(4, 2, 1, 1),
    _case(4, 2, 3, 64),
    _case(3, 5, 4, 16),
    _case(3, 5, 2, 1),
    _case(3, 5, 3, 64),
)

PROBE = register(
    Probe(
        name="target_verify_metadata",
        version=1,
        description="target-verify graph metadata with T != N vs the eager path and the closed form",
        cases=CASES,
        check="probes.demo_backend.judges.target_verify_metadata:check",
        requires=("torch",),
    )
)
