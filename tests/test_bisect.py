"""The pure bisection core, with deterministic oracles (property tests and examples)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracker.core.verdicts import FlakeEstimate, Outcome, Verdict, flake_estimate, verdict_of
from tracker.search.strategies import BinarySearch, InconsistentVerdicts


def run(size: int, first_bad: int, skipped: frozenset[int] = frozenset()) -> tuple[BinarySearch, int]:
    search = BinarySearch(size)
    probes = 0
    while (index := search.next_index()) is not None:
        probes += 1
        if index in skipped:
            search.record(index, Verdict.SKIP)
        else:
            search.record(index, Verdict.BAD if index >= first_bad else Verdict.GOOD)
    return search, probes


@given(st.data(), st.integers(2, 5000))
def test_finds_every_culprit_within_log2_probes(data: st.DataObject, size: int) -> None:
    first_bad = data.draw(st.integers(1, size - 1))
    search, probes = run(size, first_bad)
    assert search.answer().culprit == first_bad
    assert probes <= math.ceil(math.log2(size - 1)) if size > 2 else probes == 0


@given(st.data(), st.integers(3, 3000))
def test_answer_with_skips_always_holds_the_culprit(data: st.DataObject, size: int) -> None:
    first_bad = data.draw(st.integers(1, size - 1))
    start = data.draw(st.integers(1, size - 2))
    length = data.draw(st.integers(0, size - 1 - start))
    skipped = (
        frozenset(range(start, start + length)) - {first_bad}
        if data.draw(st.booleans())
        else frozenset(range(start, start + length))
    )
    search, probes = run(size, first_bad, skipped)
    answer = search.answer()
    assert first_bad in answer.candidates
    assert all(0 < c < size for c in answer.candidates)
    if answer.culprit is not None:
        assert answer.culprit == first_bad
    assert probes <= 3 * math.ceil(math.log2(size)) + 2


def test_a_long_untestable_stretch_costs_logarithmic_probes() -> None:
    size, stretch = 1024, frozenset(range(300, 700))
    search, probes = run(size, 800, stretch)
    assert search.answer().culprit == 800
    assert probes <= 2 * math.ceil(math.log2(size))

    search, probes = run(size, 500, stretch)
    assert search.answer().culprit is None
    assert search.answer().candidates[0] <= 300 and search.answer().candidates[-1] >= 700
    assert probes <= 2 * math.ceil(math.log2(size))


def test_culprit_just_after_a_skipped_stretch_is_named_with_the_stretch() -> None:
    search, _ = run(20, 8, frozenset({5, 6, 7}))
    assert search.answer().candidates == (8,) or set(search.answer().candidates) >= {5, 6, 7, 8}


def test_contradicting_verdicts_are_reported() -> None:
    search = BinarySearch(10)
    search.record(3, Verdict.BAD)
    search.record(6, Verdict.GOOD)
    with pytest.raises(InconsistentVerdicts):
        search.next_index()


@pytest.mark.parametrize(
    ("outcomes", "verdict"),
    [
        ([Outcome.PASS, Outcome.PASS], Verdict.GOOD),
        ([Outcome.PASS, Outcome.SKIP], Verdict.GOOD),
        ([Outcome.PASS, Outcome.FAIL], Verdict.BAD),
        ([Outcome.ERROR, Outcome.FAIL], Verdict.BAD),
        ([Outcome.ERROR, Outcome.PASS], Verdict.SKIP),
        ([Outcome.SKIP], Verdict.SKIP),
        ([], Verdict.SKIP),
    ],
)
def test_verdict_of_outcomes(outcomes: list[Outcome], verdict: Verdict) -> None:
    assert verdict_of(outcomes) is verdict


G, B, S = Verdict.GOOD, Verdict.BAD, Verdict.SKIP


def test_flake_estimate_counts_each_trees_minority() -> None:
    estimate = flake_estimate([[G, G, B], [B, B, B], [G, B, B, G], [G], [S, S, G]])
    assert estimate == FlakeEstimate(rate=(1 + 0 + 2) / (3 + 3 + 4), runs=10)


def test_flake_estimate_needs_a_tree_measured_twice() -> None:
    assert flake_estimate([]) is None
    assert flake_estimate([[G], [B], [S, G], [S, S]]) is None
    assert flake_estimate([[G, G], [B, B]]) == FlakeEstimate(0.0, 4)


@given(st.lists(st.lists(st.sampled_from([G, B, S]), max_size=8), max_size=12))
def test_flake_estimate_is_a_share_of_the_judged_runs(trees: list[list[Verdict]]) -> None:
    estimate = flake_estimate(trees)
    repeated = [t for t in trees if sum(v is not S for v in t) >= 2]
    if not repeated:
        assert estimate is None
        return
    assert estimate is not None
    assert estimate.runs == sum(sum(v is not S for v in t) for t in repeated)
    assert 0.0 <= estimate.rate <= 0.5
    assert (estimate.rate == 0.0) == all(len({v for v in t if v is not S}) == 1 for t in repeated)
