"""FA3's topk > 1 draft decode and target verify, judged query row by query row.

The cascade's two calls (prefix and expand) are read into the slots each query row reads; on
SGLang-shaped revisions a planted topk > 1 stride bug fails exactly its mode's topk 2 cases, the
fixed version passes them, and an era without the cascade skips them and says why.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from sglang_shaped.fa3 import Bug, Variant
from sglang_shaped.fa3.history import write_tree

from probes import ProbeContext, get_probe, run_probe
from probes.sglang.backends.fa3 import TreeVerifyInput
from probes.sglang.backends.fa3_read import FlashCall, FlashCalls, read_calls
from probes.sglang.family import CASES, probe_name
from probes.sglang.fixture import draft_tree
from probes.sglang.kernels_fa3 import draft_decode_set_expand_metadata
from tracker.core.verdicts import Outcome

NOT_T_NE_N = "the backend does not serve T != N"


def case_outcomes(root: Path, mode: str) -> dict[str, tuple[Outcome, str | None]]:
    ctx = ProbeContext(root=root, import_roots=("python",))
    results = run_probe(get_probe(probe_name("fa3", mode)), ctx)
    return {r.case.id: (r.result.outcome, r.result.signature) for r in results}


def topk2_cases(mode: str) -> set[str]:
    return {case.id for case in CASES[mode] if case.params.get("topk", 1) > 1}


def assert_green_apart_from(found: dict[str, tuple[Outcome, str | None]], failing: set[str]) -> None:
    """Every case outside ``failing`` passes, or skips because the backend has no T != N."""
    for case, (outcome, signature) in found.items():
        if case in failing:
            assert outcome is Outcome.FAIL, (case, found)
        else:
            assert outcome is Outcome.PASS or NOT_T_NE_N in (signature or ""), (case, found)


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)


@pytest.mark.slow
@pytest.mark.parametrize("bug", [Bug.DRAFT_DECODE_TOPK_STRIDE, Bug.VERIFY_TOPK_STRIDE], ids=lambda bug: bug.name)
def test_a_topk_stride_bug_fails_exactly_its_mode_s_topk2_cases(bug: Bug, tmp_path: Path) -> None:
    buggy = case_outcomes(write_tree(Variant("F4", frozenset({bug})), tmp_path / "bug"), bug.mode)
    assert_green_apart_from(buggy, topk2_cases(bug.mode))
    fixed = case_outcomes(write_tree(Variant("F4"), tmp_path / "fixed"), bug.mode)
    assert_green_apart_from(fixed, set())


@pytest.mark.slow
def test_an_era_without_the_cascade_skips_topk2_and_says_why(tmp_path: Path) -> None:
    found = case_outcomes(write_tree(Variant("F0"), tmp_path / "F0"), "target_verify")
    assert found["topk2-N4"] == (
        Outcome.SKIP,
        "unsupported: topk > 1: the backend has no cascade metadata (forward_metadata_spec_decode_expand)",
    )
    assert found["N4-T4"][0] is Outcome.PASS


def metadata(cu_seqlens_q: list[int], cache_seqlens: list[int], page_table: list[list[int]], q_limit: int) -> FlashCall:
    return FlashCall(
        q_limit,
        {
            "cu_seqlens_q": torch.tensor(cu_seqlens_q, dtype=torch.int32),
            "cache_seqlens_int32": torch.tensor(cache_seqlens, dtype=torch.int32),
            "page_table": torch.tensor(page_table, dtype=torch.int32),
        },
    )


def test_a_cascade_row_reads_its_request_s_prefix_then_its_own_expand_row() -> None:
    prefix = metadata([0, 2, 4], [4, 2], [[3, 9], [5, 0]], q_limit=2)
    expand = metadata([0, 1, 2, 3, 4], [1, 2, 0, 3], [[70, 0, 0], [71, 72, 0], [0, 0, 0], [80, 81, 82]], q_limit=1)
    read = read_calls(FlashCalls(prefix, expand, expand_page_size=1), 2, 2, 1024)
    assert read.problems == []
    assert [row.tolist() for row in read.rows or []] == [
        [6, 7, 18, 19, 70],
        [6, 7, 18, 19, 71, 72],
        [10, 11],
        [10, 11, 80, 81, 82],
    ]


def test_a_query_row_the_expand_call_does_not_compute_is_named() -> None:
    prefix = metadata([0, 2], [1], [[4]], q_limit=2)
    expand = metadata([0, 1, 1], [1, 1], [[8], [9]], q_limit=1)
    read = read_calls(FlashCalls(prefix, expand), 1, 1, 1024)
    assert read.problems == ["expand call computes no row for 1 query rows"]
    assert [row.tolist() for row in read.rows or []] == [[4, 8], [4]]


def test_rows_past_max_seq_len_q_are_not_computed() -> None:
    prefix = metadata([0, 2], [1], [[4]], q_limit=1)
    expand = metadata([0, 1, 2], [1, 1], [[8], [9]], q_limit=1)
    read = read_calls(FlashCalls(prefix, expand), 1, 1, 1024)
    assert read.problems == ["max_seq_len_q 1 below a request's 2 query rows"]
    assert len(read.rows or []) == 1


def test_a_branch_with_more_pages_than_its_expand_row_writes_on_into_the_next_row() -> None:
    table = torch.full((3, 2), -7, dtype=torch.int32)
    cache_loc = torch.tensor([[3, 4, 6], [8, 8, 9], [12, 14, 16]])
    lengths = torch.zeros(3, dtype=torch.int32)
    draft_decode_set_expand_metadata(lengths[:2], table[:2], torch.tensor([1]), 1, cache_loc[:2], 2, 2)
    assert table.tolist() == [[1, 2], [3, -7], [-7, -7]]
    draft_decode_set_expand_metadata(lengths, table, torch.tensor([0, 1, 1]), 1, cache_loc, 1, 2)
    assert table[2].tolist() == [6, 7]


def test_a_tree_verify_input_carries_each_draft_token_s_position() -> None:
    spec = TreeVerifyInput(4, topk=2, tree=draft_tree(4, torch.Generator().manual_seed(3)))
    spec.bind([10, 20])
    assert spec.tree is not None
    depth = spec.tree.sum(dim=1) - 1
    assert spec.positions is not None and spec.positions.tolist() == (10 + depth).tolist() + (20 + depth).tolist()
    assert spec.custom_mask.numel() == 4 * (10 + 4) + 4 * (20 + 4)
