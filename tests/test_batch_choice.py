"""Several runs chosen at once for several workers: each next point is the one whose outcome,
joint with the runs in flight, tells most about the culprit (checked against brute force), and a
Bayesian search with four workers settles an intermittent bug in a few dozen runs, not thousands."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.core.verdicts import Verdict
from tracker.search.batch import Hypotheses, Stretch, choose_batch
from tracker.search.posterior import entropy
from tracker.search.strategies import BayesianSearch

G, B = Verdict.GOOD, Verdict.BAD
rates = st.floats(0.0, 1.0)


def joint_information(hyp: Hypotheses, points: Sequence[int]) -> float:
    """I(hypothesis; outcomes of one run at each point) in nats, by brute force: every culprit,
    every outcome."""
    outcomes = [0.0] * (1 << len(points))
    conditional = 0.0
    culprits = [(hyp.none, [hyp.none_rate] * len(points))]
    culprits += [
        (s.mass, [s.after if c <= p else s.before for p in points])
        for s in hyp.stretches
        for c in range(s.lo, s.hi + 1)
    ]
    for mass, fail_rates in culprits:
        for y in range(len(outcomes)):
            outcomes[y] += mass * math.prod(r if y >> i & 1 else 1.0 - r for i, r in enumerate(fail_rates))
        conditional += mass * sum(entropy(r) for r in fail_rates)
    return -sum(p * math.log(p) for p in outcomes if p > 0.0) - conditional


@st.composite
def hypotheses(draw: st.DrawFn) -> tuple[Hypotheses, int]:
    """Culprit stretches 1 .. size-1 with random masses and rates, and "no culprit"; summing to 1."""
    size = draw(st.integers(2, 24))
    cuts = sorted(draw(st.sets(st.integers(1, size - 2), max_size=5))) if size > 2 else []
    bounds = [1] + [c + 1 for c in cuts] + [size]
    weights = [draw(st.floats(0.0, 1.0)) for _ in range(len(bounds) - 1)]
    none = draw(st.floats(0.0, 1.0))
    total = none + sum(w * (hi - lo) for w, lo, hi in zip(weights, bounds, bounds[1:]))
    if total == 0:
        none, total = 1.0, 1.0
    stretches = [
        Stretch(lo, hi - 1, w / total, draw(rates), draw(rates)) for w, lo, hi in zip(weights, bounds, bounds[1:])
    ]
    return Hypotheses(stretches, none / total, draw(rates)), size


@settings(max_examples=150, deadline=None)
@given(st.data(), hypotheses())
def test_each_next_point_is_the_most_informative_with_those_in_flight(
    data: st.DataObject, drawn: tuple[Hypotheses, int]
) -> None:
    hyp, size = drawn
    in_flight = data.draw(st.frozensets(st.integers(0, size - 1), max_size=min(4, size - 1)))
    skipped = data.draw(st.frozensets(st.integers(0, size - 1), max_size=3))
    allowed = [j for j in range(size) if j not in skipped and j not in in_flight]
    chosen = choose_batch(hyp, 1, in_flight, lambda j: j not in skipped)
    if not allowed:
        assert chosen == []
        return
    best = max(joint_information(hyp, [*sorted(in_flight), j]) for j in allowed)
    assert len(chosen) == 1 and chosen[0] in allowed
    assert joint_information(hyp, [*sorted(in_flight), chosen[0]]) >= best - 1e-9


@settings(max_examples=100, deadline=None)
@given(st.data(), hypotheses(), st.integers(1, 10))
def test_a_batch_is_distinct_allowed_points_not_in_flight(
    data: st.DataObject, drawn: tuple[Hypotheses, int], k: int
) -> None:
    hyp, size = drawn
    in_flight = data.draw(st.frozensets(st.integers(0, size - 1), max_size=3))
    skipped = data.draw(st.frozensets(st.integers(0, size - 1), max_size=3))
    batch = choose_batch(hyp, k, in_flight, lambda j: j not in skipped)
    free = size - len(in_flight | skipped)
    assert batch == sorted(set(batch)) and len(batch) == min(k, free)
    assert not set(batch) & (in_flight | skipped)


def test_one_point_alone_agrees_with_the_closed_form_of_the_single_run_search() -> None:
    rng = random.Random(3)
    for _ in range(30):
        search = BayesianSearch(40, flake_rate=0.1)
        for _ in range(rng.randint(0, 25)):
            j = rng.randint(0, 39)
            search.record(j, B if j >= 17 and rng.random() < 0.6 or rng.random() < 0.1 else G)
        if search.done():
            continue
        view = search._deciding_view()
        hyp = search._hypotheses(view)
        closed_form = search.next_indices(1)
        greedy = choose_batch(hyp, 1, (), search._allowed)
        assert abs(joint_information(hyp, closed_form) - joint_information(hyp, greedy)) < 1e-9


def test_once_sure_of_a_culprit_the_batch_tests_its_parent() -> None:
    """What is left to learn is whether the commit before the culprit passes; every point at the
    culprit itself (what quantiles of the culprit posterior give) would tell almost nothing."""
    search = BayesianSearch(65, flake_rate=0.05)
    for j in range(65):  # three passes before 30; from 30 on, half of four runs fail
        for run in range(3 if j < 30 else 4):
            search.record(j, B if j >= 30 and run % 2 == 0 else G)
    assert search.answer().culprit == 30 and search.posterior()[30] > 0.85 and not search.done()
    batch = search.next_indices(4)
    assert 29 in batch and len(set(batch)) == 4


def intermittent_run(seed: int, workers: int) -> tuple[bool, int]:
    rng = random.Random(seed)
    culprit = rng.randint(1, 64)
    search = BayesianSearch(65, flake_rate=0.05, max_runs=3000)
    search.record(64, B)
    runs = 0
    while not search.done() and (batch := search.next_indices(workers)):
        for j in batch:
            runs += 1
            search.record(j, B if j >= culprit and rng.random() < 0.5 else G)
    return search.answer().culprit == culprit, runs


def test_four_workers_settle_an_intermittent_bug_in_dozens_of_runs() -> None:
    """Half the runs after the culprit fail. Quantile batches needed the whole 3,000-run budget."""
    one = [intermittent_run(seed, 1) for seed in range(20)]
    four = [intermittent_run(seed, 4) for seed in range(20)]
    assert sum(right for right, _ in four) >= 18
    assert statistics.mean(runs for _, runs in four) < 2 * statistics.mean(runs for _, runs in one)
    assert max(runs for _, runs in four) < 500
