"""Transition detection and revert/re-land pairing: pure cores, property tests and examples."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from tracker.core.records import CommitInfo, TransitionKind
from tracker.core.verdicts import State
from tracker.search.pairing import Pair, bare_subject, pair_transitions
from tracker.search.transitions import IndexStretch, find_transitions, group_runs

G, B, S, F = State.GOOD, State.BAD, State.SKIP, State.FLAKY


def test_the_story_of_the_overwrite() -> None:
    states = [G, G, B, B, G, G, B, B, G]
    found, stretches = find_transitions(states)
    regression, fix = TransitionKind.REGRESSION, TransitionKind.FIX
    assert [(t.index, t.kind) for t in found] == [(2, regression), (4, fix), (6, regression), (8, fix)]
    assert stretches == []


def test_untestable_and_flaky_stretches_are_never_transitions() -> None:
    found, stretches = find_transitions([G, S, S, G, F, F, G])
    assert found == []
    assert stretches == [IndexStretch(S, 1, 2), IndexStretch(F, 4, 5)]


def test_a_change_across_a_stretch_names_every_candidate() -> None:
    found, _ = find_transitions([G, S, S, B])
    assert [(t.index, t.candidates) for t in found] == [(3, (1, 2, 3))]


@given(st.lists(st.sampled_from([G, B, S, F]), max_size=60))
def test_transitions_alternate_and_match_the_judged_changes(states: list[State]) -> None:
    found, stretches = find_transitions(states)
    judged = [s for s in states if s in (G, B)]
    changes = sum(1 for a, b in zip(judged, judged[1:]) if a is not b)
    assert len(found) == changes
    assert all(a.kind is not b.kind for a, b in zip(found, found[1:]))
    for t in found:
        assert states[t.index] is (B if t.kind is TransitionKind.REGRESSION else G)
        assert all(states[i] in (S, F) for i in t.candidates[:-1])
    assert sum(s.last - s.first + 1 for s in stretches) == sum(1 for s in states if s in (S, F))


@given(st.lists(st.sampled_from("abc"), max_size=40))
def test_group_runs_cover_the_line_with_equal_keys(keys: list[str]) -> None:
    runs = group_runs(keys)
    assert [i for r in runs for i in r] == list(range(len(keys)))
    assert all(len({keys[i] for i in r}) == 1 for r in runs)
    assert all(keys[a.stop - 1] != keys[b.start] for a, b in zip(runs, runs[1:]))


def commit(n: int, subject: str, reverts: str | None = None) -> CommitInfo:
    return CommitInfo(
        f"{n:040x}", (f"{n - 1:040x}",), subject, "A <a@x>", datetime(2026, 1, 1, tzinfo=UTC), None, reverts
    )


def test_pairs_from_github_messages_and_a_reland_by_subject() -> None:
    line = [
        commit(0, "base"),
        commit(1, "Big change (#1)"),
        commit(2, "Fix it (#2)"),
        commit(3, 'Revert "Fix it (#2)" (#3)', reverts=f"{2:040x}"),
        commit(4, "Fix it (#4)"),
    ]
    trees = ["t0", "t1", "t2", "t1", "t2"]
    pairs = pair_transitions(line, trees, [1, 2, 3, 4], lambda sha: None)
    assert pairs == {3: Pair(f"{2:040x}", "reverts"), 4: Pair(f"{2:040x}", "relands")}


def test_a_silent_revert_is_found_by_the_trees_and_a_reland_by_its_patch() -> None:
    line = [commit(0, "base"), commit(1, "Fix"), commit(2, "tidy"), commit(3, "undo"), commit(4, "redo")]
    trees = ["bad", "good", "good", "bad", "good"]
    patches = {f"{1:040x}": "p", f"{4:040x}": "p", f"{3:040x}": "q"}
    pairs = pair_transitions(line, trees, [1, 3, 4], patches.get)
    assert pairs == {3: Pair(f"{1:040x}", "reverts"), 4: Pair(f"{1:040x}", "relands")}


def test_bare_subject_drops_pr_numbers() -> None:
    assert bare_subject("Fix it (#12) (#15)") == "Fix it"
