"""SGLang's Triton backend through the invariant probes, on SGLang-shaped revisions, and the CPU
versions of the triton kernels it builds KV indices with.

Each planted bug of ``sglang_shaped.triton`` must fail its own mode's probe and no other; each
fixed version passes; an era without a mode skips and says why.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from cli_in import regtrack
from sglang_shaped.triton import Bug, Variant, build_triton_history, write_tree

from probes import ProbeContext, get_probe, run_probe, summarize
from probes.sglang import kernel_check, kernels_triton
from probes.sglang.family import BACKENDS, probe_name
from probes.sglang.graph import GraphRecording
from probes.sglang.kernel_check import TRITON_TRIALS, grid_launch
from probes.sglang.kernels_triton import GridKernel, create_kv_indices, generate_draft_kv_indices
from tracker.core.verdicts import Outcome

MODES = BACKENDS["triton"]
SENTINEL = -7


def outcomes(root: Path) -> dict[str, tuple[Outcome, str | None]]:
    """Each Triton family probe's verdict at the revision under ``root``."""
    ctx = ProbeContext(root=root, import_roots=("python",))
    found = {}
    for mode in MODES:
        result = summarize(run_probe(get_probe(probe_name("triton", mode)), ctx))
        found[mode] = (result.outcome, result.signature)
    return found


def bugged(era: str, bug: Bug) -> Variant:
    return Variant(era, frozenset({bug}))


def judged(variant: Variant, where: Path) -> dict[str, tuple[Outcome, str | None]]:
    return outcomes(write_tree(variant, where))


def case_outcomes(variant: Variant, where: Path, mode: str) -> dict[str, Outcome]:
    ctx = ProbeContext(root=write_tree(variant, where), import_roots=("python",))
    return {r.case.id: r.result.outcome for r in run_probe(get_probe(probe_name("triton", mode)), ctx)}


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)
    return tmp_path / "home"


@pytest.mark.slow
@pytest.mark.parametrize("era", ["T1", "T3"])
def test_a_fixed_revision_passes_every_mode_and_names_its_era(era: str, tmp_path: Path) -> None:
    found = judged(Variant(era), tmp_path / era)
    assert {mode: outcome for mode, (outcome, _) in found.items()} == dict.fromkeys(MODES, Outcome.PASS)
    ctx = ProbeContext(root=tmp_path / era, import_roots=("python",))
    [first, *_] = run_probe(get_probe(probe_name("triton", "decode")), ctx)
    assert (first.result.detail or "").startswith(f"era {era}: defines ")


@pytest.mark.slow
def test_an_era_without_draft_modes_skips_them_and_says_why(tmp_path: Path) -> None:
    found = judged(Variant("T0"), tmp_path / "T0")
    assert found["decode"][0] is Outcome.PASS and found["target_verify"][0] is Outcome.PASS
    no_draft = "unsupported: no draft decode: the module has no TritonMultiStepDraftBackend"
    assert found["draft_decode"] == (Outcome.SKIP, no_draft)
    assert found["draft_extend"][0] is Outcome.SKIP
    assert "no draft-extend CUDA graph" in (found["draft_extend"][1] or "")


@pytest.mark.slow
def test_t_ne_n_skips_where_every_request_gets_n_tokens_and_is_judged_where_t_comes_from_the_batch(
    tmp_path: Path,
) -> None:
    fixed_n = case_outcomes(Variant("T3"), tmp_path / "n", "target_verify")
    assert fixed_n == {"N4-T2": Outcome.SKIP, "N3-T5": Outcome.SKIP, "N4-T4": Outcome.PASS, "topk2-N4": Outcome.PASS}
    decoupled = case_outcomes(Variant("T3", decoupled=True), tmp_path / "t", "target_verify")
    assert set(decoupled.values()) == {Outcome.PASS}


PLANTED = [("T3", bug) for bug in Bug if bug is not Bug.VERIFY_T_NE_N] + [
    ("T1", Bug.DECODE_CAPTURE),
    ("T1", Bug.DRAFT_DECODE_REPLAY),
    ("T1", Bug.VERIFY_REPLAY),
    ("T1", Bug.DRAFT_EXTEND_TOPK),
]


@pytest.mark.slow
@pytest.mark.parametrize(("era", "bug"), PLANTED, ids=[f"{era}-{bug.name}" for era, bug in PLANTED])
def test_a_planted_bug_fails_its_own_mode_and_no_other(era: str, bug: Bug, tmp_path: Path) -> None:
    found = judged(Variant(era, frozenset({bug})), tmp_path / "bug")
    failing = {mode for mode, (outcome, _) in found.items() if outcome is Outcome.FAIL}
    assert failing == {bug.mode}, found
    assert all(outcome is Outcome.PASS for mode, (outcome, _) in found.items() if mode != bug.mode), found


@pytest.mark.slow
@pytest.mark.parametrize("era", ["T1", "T3"])
def test_the_t_ne_n_bug_fails_only_the_decoupled_t_ne_n_cases(era: str, tmp_path: Path) -> None:
    bad = Variant(era, frozenset({Bug.VERIFY_T_NE_N}), decoupled=True)
    cases = case_outcomes(bad, tmp_path / "bad", "target_verify")
    assert cases == {"N4-T2": Outcome.FAIL, "N3-T5": Outcome.FAIL, "N4-T4": Outcome.PASS, "topk2-N4": Outcome.PASS}


@pytest.mark.slow
def test_the_topk_stride_bug_fails_only_the_topk_2_draft_extend(tmp_path: Path) -> None:
    cases = case_outcomes(Variant("T3", frozenset({Bug.DRAFT_EXTEND_TOPK})), tmp_path / "bad", "draft_extend")
    assert cases == {"T3": Outcome.PASS, "T1": Outcome.PASS, "topk2-T4": Outcome.FAIL}


@pytest.mark.slow
def test_a_scan_finds_the_planted_draft_extend_bugs_and_their_fixes(tmp_path: Path) -> None:
    story = build_triton_history(
        tmp_path / "sglang",
        [
            ("Initial triton backend", Variant("T0"), "root"),
            ("[Spec] Triton multi-step draft backend and draft extend graphs", Variant("T1"), None),
            ("[perf] Draft-extend KV indices from seq_lens", bugged("T1", Bug.DRAFT_EXTEND_REPLAY), "introduced"),
            ("Fix DRAFT_EXTEND_V2 CG metadata: prefix-only KV indices", Variant("T1"), "fixed"),
            ("[refactor] init_forward_metadata out of graph", Variant("T3"), None),
            ("[Spec] Stride draft-extend qo_indptr by num_steps + 1", bugged("T3", Bug.DRAFT_EXTEND_TOPK), "topk"),
            ("Fix triton draft-extend qo_indptr stride at topk > 1", Variant("T3"), "topk_fixed"),
        ],
    )
    where = tmp_path / "config"
    where.mkdir()
    probe = probe_name("triton", "draft_extend")
    (where / "regtrack.toml").write_text(
        f'[targets.sglang]\nrepo = {str(story.path)!r}\npaths = ["python/sglang"]\nbranch = "main"\n'
        f'import_roots = ["python"]\nprobes = [{probe!r}]\n'
    )
    run = regtrack("run", "--probe", probe, story.roles["root"], "--json", cwd=where)
    [row] = json.loads(run.stdout)["rows"]
    assert row["verdict"] == "skip" and "no draft-extend CUDA graph" in row["signature"]
    result = regtrack("scan", f"{story.commits[1]}..{story.commits[-1]}", "--probe", probe, "--json", cwd=where)
    assert result.exit_code == 0, result.output
    found = [(t["sha"], t["kind"]) for t in json.loads(result.stdout)["transitions"]]
    roles = story.roles
    assert found == [
        (roles["introduced"], "regression"),
        (roles["fixed"], "fix"),
        (roles["topk"], "regression"),
        (roles["topk_fixed"], "fix"),
    ]


def naive_kv_indices(req_to_token, req_pool_indices, lens, kv_indptr, starts, kv_indices, rows):
    """``create_flashinfer_kv_indices_triton`` written as its loop, program by program."""
    flat = req_to_token.reshape(-1)
    for b in range(rows):
        begin = 0 if starts is None else int(starts[b])
        for k in range(int(lens[b])):
            source = int(req_pool_indices[b]) * req_to_token.shape[1] + begin + k
            kv_indices[int(kv_indptr[b]) + k] = flat[source]


def test_the_kv_indices_kernel_copies_each_request_s_slots_and_leaves_the_rest() -> None:
    generator = torch.Generator().manual_seed(3)
    req_to_token = torch.randint(0, 10_000, (6, 40), generator=generator, dtype=torch.int32)
    req_pool_indices = torch.tensor([4, 1, 5])
    for starts in (None, torch.tensor([3, 0, 7])):
        lens = torch.tensor([5, 0, 9], dtype=torch.int32)
        kv_indptr = torch.tensor([0, 5, 5, 14], dtype=torch.int32)
        got = torch.full((20,), SENTINEL, dtype=torch.int64)
        want = got.clone()
        GridKernel(create_kv_indices)[(3,)](req_to_token, req_pool_indices, lens, kv_indptr, starts, got, 40)
        naive_kv_indices(req_to_token, req_pool_indices, lens, kv_indptr, starts, want, 3)
        assert torch.equal(got, want)
        assert (got[14:] == SENTINEL).all()


def test_the_kv_indices_kernel_runs_only_the_programs_of_its_grid() -> None:
    req_to_token = torch.arange(3 * 8, dtype=torch.int32).reshape(3, 8)
    got = torch.full((8,), SENTINEL, dtype=torch.int64)
    launch = GridKernel(create_kv_indices)[(1,)]
    launch(req_to_token, torch.tensor([2, 1]), torch.tensor([2, 3]), torch.tensor([0, 2, 5]), None, got, 8)
    assert got.tolist() == [16, 17] + [SENTINEL] * 6


def test_a_recorded_kv_indices_launch_replays_over_new_batches() -> None:
    """No host sync: recorded once, the ops give the kernel's answer for lengths set later."""
    req_to_token = torch.arange(4 * 16, dtype=torch.int32).reshape(4, 16)
    req_pool_indices, lens = torch.tensor([1, 3]), torch.tensor([2, 3], dtype=torch.int32)
    kv_indptr, kv_indices = torch.tensor([0, 2, 5], dtype=torch.int32), torch.zeros(40, dtype=torch.int64)
    with GraphRecording() as recording:
        GridKernel(create_kv_indices)[(2,)](req_to_token, req_pool_indices, lens, kv_indptr, None, kv_indices, 16)
    req_pool_indices.copy_(torch.tensor([2, 0]))
    lens.copy_(torch.tensor([4, 1]))
    kv_indptr.copy_(torch.tensor([0, 4, 5]))
    recording.replay()
    assert kv_indices[:5].tolist() == [32, 33, 34, 35, 0]


def naive_draft_kv_indices(req_pool_indices, req_to_token, lens, kv_indices, kv_indptr, positions, grid, page):
    """``generate_draft_decode_kv_indices`` written as its loop, program by program."""
    steps, seqs, topk = grid
    for step in range(steps):
        done = step + 1
        for b in range(seqs):
            seq = int(lens[b])
            row = req_to_token[int(req_pool_indices[b])]
            for t in range(topk):
                offset = int(lens[:b].sum()) * topk + b * done * topk + t * (seq + done)
                if page == 1 or topk == 1:
                    first = seq + t * steps
                else:
                    last = seq % page
                    first = seq // page * page + t * (-(-(last + steps) // page)) * page + last
                slots = torch.cat([row[:seq], row[first : first + done]])
                kv_indices[step, offset : offset + seq + done] = slots
                z = b * topk + t or seqs * topk
                kv_indptr[step, z] = int(positions[:z].sum()) + z * done


@pytest.mark.parametrize(("topk", "page"), [(1, 1), (1, 16), (2, 1), (2, 16)])
def test_the_draft_kernel_lays_out_every_step_and_branch(topk: int, page: int) -> None:
    generator = torch.Generator().manual_seed(topk * 100 + page)
    req_to_token = torch.randint(0, 50_000, (5, 128), generator=generator, dtype=torch.int32)
    req_pool_indices, lens = torch.tensor([3, 1, 4]), torch.tensor([17, 5, 32], dtype=torch.int32)
    positions = lens.repeat_interleave(topk).to(torch.int64)
    grid = (3, 3, topk)
    got_indices = torch.full((3, 600), SENTINEL, dtype=torch.int64)
    got_indptr = torch.full((3, 9), SENTINEL, dtype=torch.int32)
    want_indices, want_indptr = got_indices.clone(), got_indptr.clone()
    GridKernel(generate_draft_kv_indices)[grid](
        req_pool_indices, req_to_token, lens, got_indices, got_indptr, positions, 128, 600, 9, 4, 4, 8, page
    )
    naive_draft_kv_indices(req_pool_indices, req_to_token, lens, want_indices, want_indptr, positions, grid, page)
    assert torch.equal(got_indices, want_indices)
    assert torch.equal(got_indptr, want_indptr)
    assert (got_indptr[:, 0] == SENTINEL).all()


@pytest.mark.parametrize("name", sorted(TRITON_TRIALS))
def test_the_gpu_comparison_trials_launch_the_cpu_versions_as_sglang_launches_the_kernels(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trials ``kernel_check`` runs against the real kernels on a GPU drive the CPU versions
    positionally, as SGLang's backends launch them; here on CPU tensors, against themselves."""
    monkeypatch.setattr(kernel_check, "_to_cuda", lambda arguments: arguments)
    cpu = grid_launch(kernels_triton.KERNELS[name](None))
    trials = list(TRITON_TRIALS[name](None, torch.Generator().manual_seed(0)))
    assert len(trials) == 4
    for label, arguments in trials:
        written = {k: v.clone() for k, v in arguments.items() if isinstance(v, torch.Tensor)}
        cpu(**arguments)
        assert any(not torch.equal(v, arguments[k]) for k, v in written.items()), label
