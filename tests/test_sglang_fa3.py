"""SGLang's FlashAttention (FA3) backend through the invariant probes, on SGLang-shaped revisions.

Each planted bug of ``sglang_shaped.fa3`` must fail its own mode's probe and no other; each fixed
version passes; an era without a mode skips and says why.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from cli_in import regtrack
from sglang_shaped.fa3 import Bug, Variant, build_fa3_history
from sglang_shaped.fa3.history import write_tree

from probes import ProbeContext, get_probe, run_probe, summarize
from probes.sglang.family import BACKENDS, probe_name
from probes.sglang.kernels_fa3 import draft_decode_set_expand_metadata, draft_extend_set_metadata
from probes.sglang.kernels_fa3 import normal_decode_set_metadata as fused_decode
from tracker.core.verdicts import Outcome

MODES = BACKENDS["fa3"]


def outcomes(root: Path) -> dict[str, tuple[Outcome, str | None]]:
    """Each FA3 family probe's verdict at the revision under ``root``."""
    ctx = ProbeContext(root=root, import_roots=("python",))
    found = {}
    for mode in MODES:
        result = summarize(run_probe(get_probe(probe_name("fa3", mode)), ctx))
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
@pytest.mark.parametrize("era", ["F1", "F4"])
def test_a_fixed_revision_passes_every_mode(era: str, tmp_path: Path) -> None:
    found = judged(Variant(era), tmp_path / era)
    assert {mode: outcome for mode, (outcome, _) in found.items()} == dict.fromkeys(MODES, Outcome.PASS)


@pytest.mark.slow
def test_an_era_without_draft_modes_skips_them_and_says_why(tmp_path: Path) -> None:
    found = judged(Variant("F0"), tmp_path / "F0")
    assert found["decode"][0] is Outcome.PASS and found["target_verify"][0] is Outcome.PASS
    no_draft = "unsupported: no draft decode: the module has no FlashAttentionMultiStepBackend"
    assert found["draft_decode"] == (Outcome.SKIP, no_draft)
    assert found["draft_extend"][0] is Outcome.SKIP
    assert "no draft-extend CUDA graph" in (found["draft_extend"][1] or "")


PLANTED = [("F4", bug) for bug in Bug if bug is not Bug.VERIFY_T_NE_N] + [
    ("F1", Bug.DECODE_REPLAY),
    ("F1", Bug.DRAFT_DECODE_CAPTURE),
    ("F1", Bug.VERIFY_CAPTURE),
    ("F1", Bug.DRAFT_EXTEND_REPLAY),
]


@pytest.mark.slow
@pytest.mark.parametrize(("era", "bug"), PLANTED, ids=[f"{era}-{bug.name}" for era, bug in PLANTED])
def test_a_planted_bug_fails_its_own_mode_and_no_other(era: str, bug: Bug, tmp_path: Path) -> None:
    found = judged(Variant(era, frozenset({bug})), tmp_path / "bug")
    failing = {mode for mode, (outcome, _) in found.items() if outcome is Outcome.FAIL}
    assert failing == {bug.mode}, found
    assert all(outcome is Outcome.PASS for mode, (outcome, _) in found.items() if mode != bug.mode), found


@pytest.mark.slow
def test_t_ne_n_is_judged_where_target_verify_takes_t_from_the_batch(tmp_path: Path) -> None:
    ctx = ProbeContext(root=write_tree(Variant("F4", decoupled=True), tmp_path / "good"), import_roots=("python",))
    cases = {r.case.id: r.result.outcome for r in run_probe(get_probe(probe_name("fa3", "target_verify")), ctx)}
    assert cases["N4-T2"] is Outcome.PASS and cases["N3-T5"] is Outcome.PASS
    bad = judged(Variant("F4", frozenset({Bug.VERIFY_T_NE_N}), decoupled=True), tmp_path / "bad")
    assert bad["target_verify"][0] is Outcome.FAIL and "kv_len" in (bad["target_verify"][1] or "")
    assert all(outcome is Outcome.PASS for mode, (outcome, _) in bad.items() if mode != "target_verify")


@pytest.mark.slow
def test_a_scan_finds_the_planted_target_verify_bug_and_its_fix(tmp_path: Path) -> None:
    good, bad = Variant("F4"), Variant("F4", frozenset({Bug.VERIFY_REPLAY}))
    story = build_fa3_history(
        tmp_path / "sglang",
        [
            ("Initial FlashAttention backend", Variant("F0"), None),
            ("[Spec] FA3 multi-step draft backend and draft extend graphs", Variant("F1"), None),
            ("[refactor] init_forward_metadata out of graph", good, None),
            ("[perf] Reuse the verify buffers across replays", bad, "introduced"),
            ("Fix FA3 target verify cache_seqlens on replay", good, "fixed"),
        ],
    )
    where = tmp_path / "config"
    where.mkdir()
    probe = probe_name("fa3", "target_verify")
    (where / "regtrack.toml").write_text(
        f'[targets.sglang]\nrepo = {str(story.path)!r}\npaths = ["python/sglang"]\nbranch = "main"\n'
        f'import_roots = ["python"]\nprobes = [{probe!r}]\n'
    )
    result = regtrack("scan", f"{story.commits[0]}..{story.commits[-1]}", "--probe", probe, "--json", cwd=where)
    assert result.exit_code == 0, result.output
    found = [(t["sha"], t["kind"]) for t in json.loads(result.stdout)["transitions"]]
    assert found == [(story.roles["introduced"], "regression"), (story.roles["fixed"], "fix")]


def test_the_fused_decode_kernel_writes_every_row_and_leaves_other_columns() -> None:
    req_to_token = torch.arange(4 * 64, dtype=torch.int32).reshape(4, 64)
    cache, cu = torch.full((2,), -7, dtype=torch.int32), torch.full((3,), -7, dtype=torch.int32)
    page_table = torch.full((2, 6), -7, dtype=torch.int32)
    seq_lens = torch.tensor([5, 17])
    fused_decode(cache, cu, page_table, req_to_token, torch.tensor([2, 1]), torch.arange(0, 64, 16), 3, seq_lens, 1, 16)
    assert cache.tolist() == [6, 18] and cu.tolist() == [0, 6, 24]
    assert page_table[:, :3].tolist() == [[8, 9, 10], [4, 5, 6]]
    assert (page_table[:, 3:] == -7).all()


def test_the_draft_extend_kernel_writes_only_the_pages_of_each_length() -> None:
    req_to_token = torch.arange(4 * 64, dtype=torch.int32).reshape(4, 64)
    cache, cu_k, cu_q = (torch.full((n,), -7, dtype=torch.int32) for n in (2, 3, 3))
    page_table = torch.full((2, 4), -7, dtype=torch.int32)
    draft_extend_set_metadata(
        cache,
        cu_k,
        cu_q,
        page_table,
        req_to_token,
        torch.tensor([3, 0]),
        torch.tensor([17, 3]),
        torch.tensor([2, 3], dtype=torch.int32),
        16,
    )
    assert cache.tolist() == [17, 3] and cu_k.tolist() == [0, 17, 20] and cu_q.tolist() == [0, 2, 5]
    assert page_table.tolist() == [[12, 13, -7, -7], [0, -7, -7, -7]]


def test_the_expand_kernel_keeps_each_branch_s_distinct_pages_in_order() -> None:
    cache, page_table = torch.zeros(4, dtype=torch.int32), torch.full((4, 3), -7, dtype=torch.int32)
    cache_loc = torch.tensor([[32, 33], [48, 64], [80, 81], [96, 97]])
    draft_decode_set_expand_metadata(cache, page_table, torch.tensor([3, 0]), 2, cache_loc, 2, 16)
    assert cache.tolist() == [5, 5, 2, 2]
    assert page_table.tolist() == [[2, -7, -7], [3, 4, -7], [5, -7, -7], [6, -7, -7]]
