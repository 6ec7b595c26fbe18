"""Which CUDA-graph metadata API a revision's TRTLLM MHA backend has, told by its features.

Never by date or SHA: by what the backend class itself defines, which metadata kernels its
module calls, and what its metadata record holds.

| era | feature |
|---|---|
| A  | separate ``init_forward_metadata_capture_cuda_graph`` / ``..._replay_cuda_graph`` |
| B  | the same entry points; capture builds the buffers (``_build_cuda_graph_metadata``) then runs the replay body |
| C1 | ``init_forward_metadata_out_graph(forward_batch, in_capture)``, torch page-table copies |
| C2 | C, page table built by a device kernel (``build_trtllm_mha_page_table``) |
| C3 | C2, and the metadata record has no ``max_seq_len_k`` |
| D1 | ``init_forward_metadata_in_graph``: one fused kernel recorded in the graph |
| D2 | D, the kernels come from ``sglang.kernels`` |
| D3 | D2, target verify may carry a ragged layout (``spec_info.ragged_verify_layout``) |

Era A splits further by behaviour, not by feature: A1 revisions take N (the configured draft
length) as every request's query length even on the eager path, so they cannot serve T != N at
all; ``probes.sglang.invariants`` tells it from the eager metadata.
"""

from __future__ import annotations

import dataclasses
from types import ModuleType

from probes.sglang.backends.base import Era
from probes.sglang.graph import CAPTURE_REPLAY, IN_GRAPH, OUT_OF_GRAPH
from probes.sglang.kernels import KNOWN_KERNELS

BACKEND_CLASS = "TRTLLMHAAttnBackend"
METADATA_CLASS = "TRTLLMMHAMetadata"


def detect_era(module: ModuleType) -> Era:
    """The era of the backend module ``module`` (the revision's ``trtllm_mha_backend``)."""
    backend = getattr(module, BACKEND_CLASS, None)
    if not isinstance(backend, type):
        return Era("?", None, (f"no class {BACKEND_CLASS}",))
    own = set(vars(backend))
    kernels = _kernels_called(module)
    fields = _metadata_fields(module)
    findings = [f"defines {name}" for name in sorted(own.intersection(GRAPH_METHODS))]
    findings += [f"calls {name} from {origin}" for name, origin in sorted(kernels.items())]
    if "init_forward_metadata_in_graph" in own:
        label = _d_era(module, backend, kernels)
        return Era(label, IN_GRAPH, tuple(findings))
    if "init_forward_metadata_out_graph" in own:
        if "build_trtllm_mha_page_table" not in kernels:
            label = "C1"
        else:
            label = "C2" if "max_seq_len_k" in fields else "C3"
            findings.append("metadata has max_seq_len_k" if label == "C2" else "metadata has no max_seq_len_k")
        return Era(label, OUT_OF_GRAPH, tuple(findings))
    if {"init_forward_metadata_capture_cuda_graph", "init_forward_metadata_replay_cuda_graph"} <= own:
        label = "B" if "_build_cuda_graph_metadata" in own else "A"
        return Era(label, CAPTURE_REPLAY, tuple(findings))
    return Era("?", None, tuple(findings) or ("no CUDA-graph metadata entry point",))


GRAPH_METHODS = (
    "init_forward_metadata_capture_cuda_graph",
    "init_forward_metadata_replay_cuda_graph",
    "_build_cuda_graph_metadata",
    "_apply_cuda_graph_metadata",
    "init_forward_metadata_out_graph",
    "init_forward_metadata_in_graph",
)
"""The methods through which the graph runner reaches a backend's CUDA-graph metadata, over the eras."""


def _d_era(module: ModuleType, backend: type, kernels: dict[str, str]) -> str:
    ragged = "resolve_ragged_verify_layout" in vars(module) or getattr(backend, "supports_ragged_verify_graph", False)
    if ragged:
        return "D3"
    if any(origin.startswith("sglang.kernels") for origin in kernels.values()):
        return "D2"
    return "D1"


def _kernels_called(module: ModuleType) -> dict[str, str]:
    """Known metadata kernels the module imports -> the module that defines them."""
    found = {}
    for name in KNOWN_KERNELS:
        function = vars(module).get(name)
        if function is not None:
            wrapped = getattr(function, "__wrapped__", function)
            found[name] = getattr(wrapped, "__module__", "?")
    return found


def _metadata_fields(module: ModuleType) -> set[str]:
    record = getattr(module, METADATA_CLASS, None)
    if record is None or not dataclasses.is_dataclass(record):
        return set()
    return {f.name for f in dataclasses.fields(record)}


def has_sliding_window_page_table(module: ModuleType) -> bool:
    return "swa_page_table" in _metadata_fields(module)
