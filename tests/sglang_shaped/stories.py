"""The stories written into the histories: the four transitions of DESIGN.md §1, in one era or
across all of them."""

from __future__ import annotations

from pathlib import Path

from .history import HistoryWriter, ShapedManifest, Timeline
from .variant import ERAS, Variant

CROSS_ERA = "A1-D2"

INITIAL = "Initial import of the serving runtime and its attention backends"
INTRODUCED = "[spec_v2] Enable trtllm_mha draft-extend CUDA graph with v2 semantics (#25002)"
FIX_SUBJECT = "Fix TRTLLM target verify query metadata (#27473)"
REVERT_SUBJECT = f'Revert "{FIX_SUBJECT}" (#27494)'
RELAND_SUBJECT = "Fix TRTLLM target verify query metadata (#27495)"

ERA_CHANGES = {
    "A2": "Add support for generic num_tokens_per_bs in TARGET_VERIFY (#25681)",
    "B": "[refactor] unify cuda-graph capture/replay across attention backends (#26665)",
    "C1": "[refactor] init_forward_metadata 3-method ABC + side-channel removal (#26735)",
    "C2": "[attn backend] Make seq_lens_cpu optional in trtllm_mha backend (#28106)",
    "C3": "[misc] Trim dead code in trtllm_mha page-table backend (#28578)",
    "D1": "[trtllm_mha] Fuse cuda-graph metadata rebuild into one triton kernel (#29843)",
    "D2": "[Kernel] Introduce sglang.kernels namespace and migrate triton_ops kernels (#30044)",
}
POOLS_ON_BACKEND = "feat(model_runner): remove pool/backend refs from ForwardBatch (#25983)"
V1_REMOVED = "[Spec] Remove deprecated EAGLE v1 DRAFT_EXTEND forward mode (#28129)"


def build_sglang_shaped_history(
    path: Path,
    era: str = "C1",
    *,
    bad_commits: int = 3,
    reverted_commits: int = 3,
    stub_reached: bool = True,
    revert_body: bool = True,
) -> ShapedManifest:
    """A new repository at ``path`` (absent or empty) whose ``main`` tells the story in ``era``
    (one of ``variant.ERAS``), or across every era with ``era=CROSS_ERA``.

    ``bad_commits``/``reverted_commits``: unrelated commits between the regression and the fix,
    and between the revert and the re-land. ``stub_reached``: include a commit (and its undoing)
    that calls a GPU library on the eager target-verify path. ``revert_body``: give the revert
    GitHub's ``This reverts commit <sha>.`` body (the real #27494 has only the subject).
    """
    if era == CROSS_ERA:
        timeline = _cross_era(bad_commits, reverted_commits, stub_reached)
    elif era in ERAS:
        timeline = _one_era(era, bad_commits, reverted_commits, stub_reached)
    else:
        raise ValueError(f"unknown era {era!r}; expected one of {', '.join(ERAS)} or {CROSS_ERA!r}")
    writer = HistoryWriter(path)
    for commit in timeline.commits:
        writer.write(commit, revert_body=revert_body)
    return writer.manifest(era)


def build_cross_era_history(path: Path, **options: object) -> ShapedManifest:
    """A1 -> A2 -> B -> C1 (the story) -> C2 -> C3 -> D1 -> D2 in one repository."""
    return build_sglang_shaped_history(path, CROSS_ERA, **options)  # type: ignore[arg-type]


def _story(timeline: Timeline, bad_commits: int, reverted_commits: int) -> None:
    """Regression in a larger change, fix, one unrelated commit, revert, re-land."""
    era = timeline.variant.era
    planted = {"spec_v2": True} if era == "C1" else {"spec_v2_note": True}
    timeline.large_change(INTRODUCED, **planted)
    timeline.unrelated(bad_commits)
    timeline.commit(FIX_SUBJECT, role="fixed", maintainer=True, overwrite=False)
    timeline.unrelated(1, role="between_fix_and_revert")
    timeline.commit(REVERT_SUBJECT, role="reverted", maintainer=True, reverts="fixed", overwrite=True)
    timeline.unrelated(reverted_commits)
    timeline.commit(RELAND_SUBJECT, role="relanded", maintainer=True, overwrite=False)


def _one_era(era: str, bad_commits: int, reverted_commits: int, stub_reached: bool) -> Timeline:
    timeline = Timeline(Variant(era))
    timeline.commit(INITIAL, role="root")
    timeline.unrelated()
    timeline.docs_only()
    timeline.unrelated()
    timeline.read_file_touched()
    if stub_reached:
        timeline.stub_detour()
    timeline.unrelated(2)
    _story(timeline, bad_commits, reverted_commits)
    timeline.unrelated(2)
    return timeline


def _cross_era(bad_commits: int, reverted_commits: int, stub_reached: bool) -> Timeline:
    # A1 as it was: N everywhere, and the replay ends with the overwrite (harmless where T = N).
    timeline = Timeline(Variant("A1", overwrite=True))
    timeline.commit(INITIAL, role="root")
    timeline.unrelated()
    timeline.docs_only()
    timeline.commit(ERA_CHANGES["A2"], role="era_A2", era="A2", overwrite=False)
    timeline.unrelated()
    timeline.commit(POOLS_ON_BACKEND, role="pools_on_backend", backend_pools=True)
    timeline.unrelated()
    timeline.commit(ERA_CHANGES["B"], role="era_B", era="B")
    timeline.read_file_touched()
    if stub_reached:
        timeline.stub_detour()
    timeline.unrelated()
    timeline.commit(ERA_CHANGES["C1"], role="era_C1", era="C1")
    timeline.unrelated()
    _story(timeline, bad_commits, reverted_commits)
    timeline.unrelated()
    timeline.commit(V1_REMOVED, role="v1_draft_extend_removed", v1_removed=True)
    for era in ("C2", "C3", "D1", "D2"):
        timeline.commit(ERA_CHANGES[era], role=f"era_{era}", era=era)
        timeline.unrelated()
    return timeline
