"""SGLang TRTLLM MHA sliding-window page table (hybrid SWA models) after graph replays and eagerly.

For decode and for target verify (T == N), the pages a sliding-window layer reads must be those of
the request's last ``window`` tokens, translated through the pool's full->SWA slot mapping. The
check is ``probes.sglang.judges``'s.
"""

from __future__ import annotations

from probes.api import Case, Probe
from probes.registry import register

CASES = (
    Case("decode-p16-w64", dict(mode="decode", page=16, window=64, tokens=1)),
    Case("decode-p1-w32", dict(mode="decode", page=1, window=32, tokens=1)),
    Case("verify-p16-w32", dict(mode="target_verify", page=16, window=32, tokens=3)),
)


PROBE = register(
    Probe(
        name="sglang_swa_page_table",
        version=1,
        description="SGLang trtllm_mha sliding-window page table and write locations after graph replays and eagerly",
        cases=CASES,
        check="probes.sglang.judges.swa_page_table:check",
        requires=("torch",),
        deterministic=True,
    )
)
