"""The bugs the demo history plants in ``backend/``, as exact edits of the correct source.

Each edit replaces one snippet that must occur exactly once in its file, so a change to
``backend/`` that moves a snippet breaks the demo build loudly instead of silently planting
nothing. Applying an edit and then its inverse gives back the original bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Edit:
    path: str
    old: str
    new: str

    def apply(self, files: dict[str, bytes]) -> dict[str, bytes]:
        text = files[self.path].decode()
        count = text.count(self.old)
        if count != 1:
            raise ValueError(f"demo edit anchor occurs {count} times in {self.path}, expected once:\n{self.old}")
        return {**files, self.path: text.replace(self.old, self.new).encode()}


@dataclass(frozen=True)
class Bug:
    name: str
    probe: str
    description: str
    edit: Edit
    also_seen_by: tuple[str, ...] = ()
    """Probes besides ``probe`` whose path the bug lies on."""

    @property
    def probes(self) -> tuple[str, ...]:
        return (self.probe, *self.also_seen_by)


TARGET_VERIFY_OVERWRITE = Bug(
    name="target_verify_overwrite",
    probe="target_verify_metadata",
    description="the target-verify apply step overwrites max_seq_len_q with the configured draft length N",
    edit=Edit(
        "backend/attention_backend.py",
        "        metadata.max_seq_len_k = int(seq_lens.max()) + metadata.max_seq_len_q\n"
        "        self._copy_page_table(metadata, req_pool_indices, metadata.max_seq_len_k)\n",
        "        metadata.max_seq_len_k = int(seq_lens.max()) + metadata.max_seq_len_q\n"
        "        self._copy_page_table(metadata, req_pool_indices, metadata.max_seq_len_k)\n"
        "        metadata.max_seq_len_q = self.speculative_num_draft_tokens\n",
    ),
    also_seen_by=("target_verify_attention",),
)

SWA_PARTIAL_PAGE = Bug(
    name="swa_partial_page",
    probe="swa_page_table",
    description="the sliding-window page table skips a request's partly filled last page",
    edit=Edit(
        "backend/attention_backend.py",
        "        num_pages = ceil_div(max_seq_len_k, self.page_size)\n        full_pages =",
        "        num_pages = max_seq_len_k // self.page_size\n        full_pages =",
    ),
)

DECODE_STALE_PAGE = Bug(
    name="decode_stale_page",
    probe="decode_graph_replay",
    description=(
        "decode replay copies the page table for seq_len - 1 tokens, so a request whose newest token "
        "opened a page reads a stale page id; only batches whose longest request just crossed a page "
        "boundary see it, so the probe's randomised replays fail some of the time"
    ),
    edit=Edit(
        "backend/attention_backend.py",
        "        metadata.max_seq_len_k = int(seq_lens.max())\n"
        "        self._copy_page_table(metadata, req_pool_indices, metadata.max_seq_len_k)\n\n"
        "    def _apply_target_verify(",
        "        metadata.max_seq_len_k = int(seq_lens.max())\n"
        "        # The newest token's KV is stored by this step itself; its page is not read yet.\n"
        "        self._copy_page_table(metadata, req_pool_indices, metadata.max_seq_len_k - 1)\n\n"
        "    def _apply_target_verify(",
    ),
)

BROKEN_IMPORT = Edit(
    "backend/attention_backend.py",
    "from .kernels import WORKSPACE_BYTES, AttentionKernel, make_kernel, resolve_kernel_name\n",
    "from .kernels.registry import WORKSPACE_BYTES, AttentionKernel, make_kernel, resolve_kernel_name\n",
)
"""Makes ``import backend`` fail: the untestable stretch."""


@dataclass(frozen=True)
class Slowdown:
    """A planted slowdown: the same results, more work; ``metric`` of ``probe`` shows it."""

    name: str
    probe: str
    metric: str
    description: str
    edit: Edit


WHOLE_ROW_GATHER = Slowdown(
    name="whole_row_gather",
    probe="demo_latency",
    metric="decode_us",
    description=(
        "the torch kernel gathers the KV of every page of a request's page-table row, not only the pages "
        "its tokens fill, and slices them after: the same output, many times the copying"
    ),
    edit=Edit(
        "backend/kernels/torch_paged.py",
        "            pages = metadata.page_table[b, : ceil_div(kv_len, page)].long()\n",
        "            pages = metadata.page_table[b].long()\n",
    ),
)

BUGS = (TARGET_VERIFY_OVERWRITE, SWA_PARTIAL_PAGE, DECODE_STALE_PAGE)
BUGS_BY_NAME = {bug.name: bug for bug in BUGS}


def read_tree(root: Path, package: str = "backend") -> dict[str, bytes]:
    """Every file of ``root/package`` except caches, keyed by its path relative to ``root``."""
    files = {}
    for path in sorted((root / package).rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            files[path.relative_to(root).as_posix()] = path.read_bytes()
    return files


def apply_edits(files: dict[str, bytes], edits: list[Edit]) -> dict[str, bytes]:
    for edit in edits:
        files = edit.apply(files)
    return files


def write_tree(files: dict[str, bytes], root: Path) -> None:
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
