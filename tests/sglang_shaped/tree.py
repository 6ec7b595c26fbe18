"""One revision's whole tree: the backend, the sglang modules it imports, and files it never reads."""

from __future__ import annotations

from dataclasses import dataclass, replace

from .render import render
from .variant import BACKEND_PATH, ERAS, FORWARD_BATCH_PATH, Variant

PY = "python/sglang"
ATTENTION = f"{PY}/srt/layers/attention"

FB_NOTES = (
    "    # Position ids",
    "    # Position ids; each request's positions start at its cached prefix length",
    "    # Position ids of the input tokens (a request's start at its cached prefix length)",
    "    # Position ids of the input tokens, counted from each request's cached prefix",
)
"""The comment above ``ForwardBatch.positions``: a read file changed without changing behaviour."""

SUPPORT = {
    f"{PY}/__init__.py": "support/sglang_init.tmpl",
    f"{PY}/kernel_api_logging.py": "support/kernel_api_logging.tmpl",
    f"{PY}/srt/environ.py": "support/environ.tmpl",
    f"{PY}/srt/utils/__init__.py": "support/utils_init.tmpl",
    f"{PY}/srt/utils/common.py": "support/utils_common.tmpl",
    f"{ATTENTION}/base_attn_backend.py": "support/base_attn_backend.tmpl",
    f"{ATTENTION}/flashinfer_backend.py": "support/flashinfer_backend.tmpl",
    f"{ATTENTION}/utils.py": "support/attention_utils.tmpl",
    f"{PY}/srt/layers/radix_attention.py": "support/radix_attention.tmpl",
    f"{PY}/srt/mem_cache/memory_pool.py": "support/memory_pool.tmpl",
    f"{PY}/srt/mem_cache/swa_memory_pool.py": "support/swa_memory_pool.tmpl",
    FORWARD_BATCH_PATH: "support/forward_batch_info.tmpl",
    f"{PY}/srt/speculative/spec_info.py": "support/spec_info.tmpl",
}
"""Path -> template of the sglang modules shared by every era (rendered with its flags)."""


@dataclass(frozen=True)
class Filler:
    """Revision counters of the files no probe reads; an unrelated commit bumps one of them."""

    docs: int = 1
    spec_docs: int = 1
    version: int = 3
    triton: int = 8
    mla: int = 32
    tests: int = 8
    spec_v2_files: bool = False
    """The files the large spec-v2 change added (a worker, a graph runner, a doc page)."""

    def bump(self, slot: str) -> Filler:
        return replace(self, **{slot: getattr(self, slot) + 1})


SLOTS = ("docs", "triton", "version", "mla", "spec_docs", "tests")
"""The counters unrelated commits bump, in turn."""


def flags(v: Variant) -> dict[str, bool]:
    v = v.normalized()
    found = {era: v.era == era for era in ERAS}
    found.update({f"at_{era}": v.at_least(era) for era in ERAS})
    found.update(
        era_A=v.family == "A",
        era_C=v.family == "C",
        era_D=v.family == "D",
        overwrite=v.overwrite,
        stub_call=v.stub_call,
        spec_v2=v.spec_v2 and not v.at_least("C2"),
        v1=not v.v1_removed,
        backend_pools=v.backend_pools,
        spec_v2_note=v.spec_v2_note,
        max_seq_len_k=v.has_max_seq_len_k,
    )
    return found


def values(v: Variant) -> dict[str, str]:
    v = v.normalized()
    return {
        "de_check": v.draft_extend_check(),
        "eager_de_check": v.eager_draft_extend_check(),
        "kv_pool": "self.token_to_kv_pool" if v.backend_pools else "forward_batch.token_to_kv_pool",
        "req_pool": "self.req_to_token_pool" if v.backend_pools else "forward_batch.req_to_token_pool",
        "fb_note": FB_NOTES[v.fb_note % len(FB_NOTES)],
    }


def backend_source(v: Variant) -> str:
    """The text of ``trtllm_mha_backend.py`` for ``v``."""
    return render("backend.tmpl", flags(v), values(v))


def kernel_files(v: Variant) -> dict[str, str]:
    """Path -> template of the triton-kernel modules the era's backend imports."""
    names = ["trtllm_fp8_kv_kernel"]
    if v.device_page_table:
        names.append("trtllm_mha_page_table")
    if v.at_least("D1"):
        names.append("trtllm_mha_graph_metadata")
    if not v.at_least("D2"):
        return {f"{ATTENTION}/triton_ops/{name}.py": f"kernels/{name}.tmpl" for name in names}
    files = {f"{PY}/kernels/ops/kvcache/{name}.py": f"kernels/{name}.tmpl" for name in names}
    files.update(
        {
            f"{PY}/kernels/__init__.py": "kernels/kernels_init.tmpl",
            f"{PY}/kernels/registry.py": "kernels/kernels_registry.tmpl",
            f"{PY}/kernels/ops/__init__.py": "kernels/kernels_ops_init.tmpl",
            f"{PY}/kernels/ops/kvcache/__init__.py": "kernels/kernels_kvcache_init.tmpl",
            f"{PY}/srt/runtime_context.py": "support/runtime_context.tmpl",
        }
    )
    return files


def filler_files(filler: Filler) -> dict[str, str]:
    """The files no probe reads, at the revisions ``filler`` names."""

    def numbered(template: str, n: int) -> str:
        return render(f"other/{template}.tmpl", {}, {"n": str(n)})

    files = {
        "README.md": numbered("readme", 0),
        "docs/backend/attention_backend.md": numbered("attention_doc", filler.docs),
        "docs/advanced_features/speculative_decoding.md": numbered("spec_doc", filler.spec_docs),
        "python/pyproject.toml": numbered("pyproject", filler.version),
        f"{PY}/version.py": numbered("version", filler.version),
        f"{ATTENTION}/triton_backend.py": numbered("triton_backend", filler.triton),
        f"{ATTENTION}/trtllm_mla_backend.py": numbered("trtllm_mla_backend", filler.mla),
        "test/registered/attention/test_trtllm_mha_backend.py": numbered("mha_test", filler.tests),
    }
    if filler.spec_v2_files:
        files[f"{PY}/srt/speculative/eagle_worker_v2.py"] = numbered("eagle_worker_v2", 0)
        files[f"{PY}/srt/speculative/eagle_draft_extend_cuda_graph_runner.py"] = numbered("draft_extend_runner", 0)
        files["docs/advanced_features/spec_v2.md"] = numbered("spec_v2_doc", 0)
    return files


def sglang_tree(v: Variant, filler: Filler | None = None) -> dict[str, str]:
    """Every file of the revision, path -> text."""
    f, vals = flags(v), values(v)
    tree = {path: render(template, f, vals) for path, template in {**SUPPORT, **kernel_files(v)}.items()}
    tree[BACKEND_PATH] = backend_source(v)
    tree.update(filler_files(filler or Filler()))
    return tree
