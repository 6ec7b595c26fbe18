"""The GPU consequence probes ``sglang_<backend>_attention`` of the FA3, Triton and FlashInfer backends.

Each case runs the backend's attention kernel under a CUDA graph with the revision's replayed
metadata for one forward mode of the scenario of ``probes.sglang.gpu.replayed`` (bs 4, prefixes
10/37/3/100, page 16, T = N = 4) and compares its output with an fp32 reference. Every case needs
CUDA; registering them imports no torch.
"""

from __future__ import annotations

from probes.api import Case, Probe
from probes.registry import register

MODES: dict[str, tuple[str, ...]] = {
    "fa3": ("target_verify", "decode", "draft_extend"),
    "triton": ("target_verify", "decode", "draft_extend"),
    "flashinfer": ("target_verify", "decode"),
}
"""Backend -> the forward modes its GPU probe runs."""
KERNELS = {
    "fa3": "FlashInfer's FA3 paged prefill, standing in for sgl_kernel's flash_attn_with_kvcache",
    "triton": "the revision's own triton decode/extend kernels",
    "flashinfer": "FlashInfer's decode and paged-prefill wrappers, replanned before each replay",
}


def probe_name(backend: str) -> str:
    return f"sglang_{backend}_attention"


def _probe(backend: str) -> Probe:
    return Probe(
        name=probe_name(backend),
        version=1,
        description=f"SGLang {backend} attention ({KERNELS[backend]}) under a CUDA graph with the revision's"
        " replayed metadata vs an fp32 reference",
        cases=tuple(Case(mode, dict(mode=mode), cuda_only=True) for mode in MODES[backend]),
        check=f"probes.sglang.gpu.{backend}:check",
        requires=("torch",),
    )


PROBES = tuple(register(_probe(backend)) for backend in MODES)
