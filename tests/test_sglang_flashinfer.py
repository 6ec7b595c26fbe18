"""SGLang's FlashInfer backend through the invariant probes, on SGLang-shaped revisions.

Each planted bug of ``sglang_shaped.flashinfer`` must fail its own mode's probe and no other; each
fixed version passes; an era without a mode skips and says why. The CPU stand-ins of FlashInfer's
wrappers keep what FlashInfer does with a plan in CUDA-graph mode.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from cli_in import regtrack
from sglang_shaped.flashinfer import Bug, Variant, build_flashinfer_history, write_tree

from probes import ProbeContext, get_probe, run_probe, summarize
from probes.sglang.backends.flashinfer_read import unpacked
from probes.sglang.family import BACKENDS, probe_name
from probes.sglang.kernels_flashinfer import (
    BatchDecodeWithPagedKVCacheWrapper,
    BatchPrefillWithPagedKVCacheWrapper,
    PlanRejected,
    fast_decode_plan,
)
from tracker.core.verdicts import Outcome

MODES = BACKENDS["flashinfer"]


def outcomes(root: Path) -> dict[str, tuple[Outcome, str | None]]:
    """Each FlashInfer family probe's verdict at the revision under ``root``."""
    ctx = ProbeContext(root=root, import_roots=("python",))
    found = {}
    for mode in MODES:
        result = summarize(run_probe(get_probe(probe_name("flashinfer", mode)), ctx))
        found[mode] = (result.outcome, result.signature)
    return found


def judged(variant: Variant, where: Path) -> dict[str, tuple[Outcome, str | None]]:
    return outcomes(write_tree(variant, where))


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)
    return tmp_path / "home"


@pytest.mark.slow
def test_a_fixed_out_of_graph_revision_passes_every_mode(tmp_path: Path) -> None:
    found = judged(Variant("B"), tmp_path / "B")
    assert {mode: outcome for mode, (outcome, _) in found.items()} == dict.fromkeys(MODES, Outcome.PASS)


@pytest.mark.slow
def test_a_capture_replay_revision_passes_and_skips_draft_extend_saying_why(tmp_path: Path) -> None:
    found = judged(Variant("A"), tmp_path / "A")
    assert all(found[mode][0] is Outcome.PASS for mode in MODES if mode != "draft_extend"), found
    assert found["draft_extend"] == (
        Outcome.SKIP,
        "unsupported: no draft extend v2 CUDA graph: the graph metadata paths never name it",
    )


PLANTED = [("B", bug) for bug in Bug] + [
    ("A", bug) for bug in (Bug.DECODE_CAPTURE, Bug.DRAFT_DECODE_REPLAY, Bug.VERIFY_CAPTURE, Bug.VERIFY_T_NE_N)
]


@pytest.mark.slow
@pytest.mark.parametrize(("era", "bug"), PLANTED, ids=[f"{era}-{bug.name}" for era, bug in PLANTED])
def test_a_planted_bug_fails_its_own_mode_and_no_other(era: str, bug: Bug, tmp_path: Path) -> None:
    found = judged(Variant(era, frozenset({bug})), tmp_path / "bug")
    failing = {mode for mode, (outcome, _) in found.items() if outcome is Outcome.FAIL}
    assert failing == {bug.mode}, found
    others = {mode: outcome for mode, (outcome, _) in found.items() if mode != bug.mode}
    assert set(others.values()) <= {Outcome.PASS, Outcome.SKIP}, found


def case_outcomes(variant: Variant, where: Path, mode: str) -> dict[str, Outcome]:
    ctx = ProbeContext(root=write_tree(variant, where), import_roots=("python",))
    return {r.case.id: r.result.outcome for r in run_probe(get_probe(probe_name("flashinfer", mode)), ctx)}


@pytest.mark.slow
def test_the_t_ne_n_bug_fails_only_where_t_differs_from_n(tmp_path: Path) -> None:
    cases = case_outcomes(Variant("B", frozenset({Bug.VERIFY_T_NE_N})), tmp_path / "bad", "target_verify")
    assert cases["N4-T2"] is Outcome.FAIL and cases["N3-T5"] is Outcome.FAIL
    assert cases["N4-T4"] is Outcome.PASS and cases["topk2-N4"] is Outcome.PASS


@pytest.mark.slow
def test_the_topk_stride_bug_fails_only_with_topk_above_one(tmp_path: Path) -> None:
    cases = case_outcomes(Variant("B", frozenset({Bug.DRAFT_DECODE_TOPK})), tmp_path / "bad", "draft_decode")
    assert cases["topk2-step1"] is Outcome.FAIL
    assert cases["step0"] is Outcome.PASS and cases["step1"] is Outcome.PASS


@pytest.mark.slow
def test_a_scan_finds_the_planted_draft_decode_bug_and_its_fix(tmp_path: Path) -> None:
    good, bad = Variant("B"), Variant("B", frozenset({Bug.DRAFT_DECODE_REPLAY}))
    story = build_flashinfer_history(
        tmp_path / "sglang",
        [
            ("Initial FlashInfer backend with CUDA graphs", Variant("A"), None),
            ("[refactor] init_forward_metadata out of graph", good, None),
            ("[perf] Skip the draft spec-info on replay", bad, "introduced"),
            ("Fix FlashInfer draft decode kv_indices on replay", good, "fixed"),
        ],
    )
    where = tmp_path / "config"
    where.mkdir()
    probe = probe_name("flashinfer", "draft_decode")
    (where / "regtrack.toml").write_text(
        f'[targets.sglang]\nrepo = {str(story.path)!r}\npaths = ["python/sglang"]\nbranch = "main"\n'
        f'import_roots = ["python"]\nprobes = [{probe!r}]\n'
    )
    result = regtrack("scan", f"{story.commits[0]}..{story.commits[-1]}", "--probe", probe, "--json", cwd=where)
    assert result.exit_code == 0, result.output
    found = [(t["sha"], t["kind"]) for t in json.loads(result.stdout)["transitions"]]
    assert found == [(story.roles["introduced"], "regression"), (story.roles["fixed"], "fix")]


def graph_decode_wrapper(bs: int, indices: int) -> BatchDecodeWithPagedKVCacheWrapper:
    return BatchDecodeWithPagedKVCacheWrapper(
        None,
        "NHD",
        use_cuda_graph=True,
        paged_kv_indptr_buffer=torch.zeros(bs + 1, dtype=torch.int32),
        paged_kv_indices_buffer=torch.full((indices,), -7, dtype=torch.int32),
        paged_kv_last_page_len_buffer=torch.ones(bs, dtype=torch.int32),
    )


def test_a_graph_decode_plan_copies_into_its_buffers_and_fast_plan_copies_nothing() -> None:
    wrapper = graph_decode_wrapper(2, 8)
    wrapper.plan(torch.tensor([0, 2, 5]), torch.tensor([4, 5, 6, 7, 8]), torch.ones(2, dtype=torch.int32), 8, 2, 64, 1)
    assert wrapper._paged_kv_indptr_buf.tolist() == [0, 2, 5]
    assert wrapper._paged_kv_indices_buf.tolist() == [4, 5, 6, 7, 8, -7, -7, -7]
    ones = torch.ones(2, dtype=torch.int32)
    fast_decode_plan(wrapper, torch.tensor([0, 1, 2]), torch.tensor([9, 9]), ones, 8, 2, 64, 1)
    assert wrapper._paged_kv_indptr_buf.tolist() == [0, 2, 5]
    assert wrapper.plans[-1].fast and wrapper.plans[-1].host_kv_indptr.tolist() == [0, 1, 2]


def test_a_graph_wrapper_refuses_another_batch_size_or_too_many_indices() -> None:
    wrapper = graph_decode_wrapper(2, 4)
    with pytest.raises(PlanRejected, match="batch size differs"):
        wrapper.plan(torch.tensor([0, 1]), torch.tensor([3]), torch.ones(1, dtype=torch.int32), 8, 2, 64, 1)
    with pytest.raises(PlanRejected, match="kv_indices exceed"):
        wrapper.plan(torch.tensor([0, 3, 5]), torch.arange(5), torch.ones(2, dtype=torch.int32), 8, 2, 64, 1)


def test_a_graph_prefill_plan_packs_each_request_s_mask_and_keeps_its_row_count() -> None:
    wrapper = BatchPrefillWithPagedKVCacheWrapper(
        None,
        "NHD",
        use_cuda_graph=True,
        qo_indptr_buf=torch.zeros(3, dtype=torch.int32),
        paged_kv_indptr_buf=torch.zeros(3, dtype=torch.int32),
        paged_kv_indices_buf=torch.zeros(16, dtype=torch.int32),
        paged_kv_last_page_len_buf=torch.ones(2, dtype=torch.int32),
        custom_mask_buf=torch.zeros(16, dtype=torch.uint8),
        mask_indptr_buf=torch.zeros(3, dtype=torch.int32),
    )
    qo, kv = torch.tensor([0, 2, 4]), torch.tensor([0, 3, 8])
    first = torch.tensor([[1, 1, 0], [1, 1, 1]], dtype=torch.bool)
    second = torch.tril(torch.ones(2, 5, dtype=torch.bool), diagonal=3)
    mask = torch.cat([first.reshape(-1), second.reshape(-1)])
    wrapper.plan(qo, kv, torch.arange(8), torch.ones(2, dtype=torch.int32), 8, 2, 64, 1, custom_mask=mask)
    assert wrapper._mask_indptr_buf.tolist() == [0, 1, 3]
    assert torch.equal(unpacked(wrapper._custom_mask_buf[0:1], 6).reshape(2, 3), first)
    assert torch.equal(unpacked(wrapper._custom_mask_buf[1:3], 10).reshape(2, 5), second)
    with pytest.raises(PlanRejected, match="more query rows than captured"):
        wrapper.plan(torch.tensor([0, 3, 6]), kv, torch.arange(8), torch.ones(2, dtype=torch.int32), 8, 2, 64, 1)
