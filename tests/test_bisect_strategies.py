"""The bisection strategies (binary, k-ary, Bayesian, auto) behind one protocol: property tests and examples.

Sizes count both ends: index 0 is the good end, ``size - 1`` the bad end, so a range holds
``n = size - 1`` candidate culprits (indices 1 .. size-1). The ends are taken as verified and not
run here; an execution is one ``record`` of a run the strategy asked for.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.core.verdicts import Verdict
from tracker.search.strategies import (
    AutoSearch,
    BayesianSearch,
    BinarySearch,
    InconsistentVerdicts,
    KarySearch,
    Strategy,
    StrategyAnswer,
    make_strategy,
)

G, B, S = Verdict.GOOD, Verdict.BAD, Verdict.SKIP


def rounds_bound(n: int, workers: int) -> int:
    """ceil(log_{W+1} n) in integers: the fewest r with (W+1)^r >= n."""
    r = 0
    while (workers + 1) ** r < n:
        r += 1
    return r


def log2_ceil(n: int) -> int:
    return rounds_bound(n, 1)


def deterministic(first_bad: int) -> Callable[[int], Verdict]:
    return lambda i: B if i >= first_bad else G


def drive(
    strategy: Strategy, verdict_of: Callable[[int], Verdict], k: int = 1, limit: int = 100_000
) -> tuple[int, int]:
    """Rounds of k runs until done: (rounds, executions)."""
    rounds = executions = 0
    while not strategy.done() and executions < limit:
        batch = strategy.next_indices(k)
        if not batch:
            break
        rounds += 1
        for index in batch:
            strategy.record(index, verdict_of(index))
            executions += 1
    return rounds, executions


def in_range(answer: StrategyAnswer, size: int) -> bool:
    inside = answer.culprit is None or 1 <= answer.culprit <= size - 1
    return inside and all(1 <= c <= size - 1 for c in answer.candidates) and 0.0 <= answer.confidence <= 1.0 + 1e-12


# -- deterministic oracles -----------------------------------------------------------------------


@given(st.data(), st.integers(2, 3000))
def test_binary_and_auto_find_every_culprit_within_their_bounds(data: st.DataObject, size: int) -> None:
    first_bad = data.draw(st.integers(1, size - 1))
    n = size - 1
    binary = BinarySearch(size)
    _, executions = drive(binary, deterministic(first_bad))
    assert binary.answer().culprit == first_bad
    assert executions <= log2_ceil(n)
    for prior in (None, 0.0, 0.004):
        auto = AutoSearch(size, flake_rate_prior=prior)
        _, auto_executions = drive(auto, deterministic(first_bad))
        assert auto.phase == "binary"
        assert auto.answer() == StrategyAnswer(first_bad, (first_bad,), 1.0)
        # without a flake in history auto trusts its results as bisection does: not one run more
        assert auto_executions <= (log2_ceil(n) + 1 if prior else executions)


@given(st.data(), st.integers(2, 3000), st.integers(1, 8))
def test_kary_finds_every_culprit_in_ceil_log_w_plus_1_rounds(data: st.DataObject, size: int, workers: int) -> None:
    first_bad = data.draw(st.integers(1, size - 1))
    for search in (KarySearch(size), BinarySearch(size), AutoSearch(size)):
        rounds, _ = drive(search, deterministic(first_bad), k=workers)
        assert search.answer().culprit == first_bad
        bound = rounds_bound(size - 1, workers)
        # auto adds one confirmation run, a round of its own
        assert rounds <= bound + (1 if isinstance(search, AutoSearch) else 0)


@pytest.mark.parametrize("n", [2, 3, 7, 8, 9, 26, 27, 28, 100, 255, 256, 300])
def test_worst_case_rounds_shrink_with_workers_exactly_as_stated(n: int) -> None:
    size = n + 1
    worst = []
    for workers in range(1, 8):
        rounds = max(drive(KarySearch(size), deterministic(c), k=workers)[0] for c in range(1, size))
        assert rounds == rounds_bound(n, workers)  # the bound is met and no strategy can do better
        worst.append(rounds)
    assert worst == sorted(worst, reverse=True)
    if n > 2:
        assert worst[-1] < worst[0]


@given(st.data(), st.integers(2, 400))
def test_binary_next_indices_of_one_is_next_index(data: st.DataObject, size: int) -> None:
    search = BinarySearch(size)
    first_bad = data.draw(st.integers(1, size - 1))
    skipped = data.draw(st.frozensets(st.integers(1, size - 1), max_size=10))
    while True:
        expected = search.next_index()
        assert search.next_indices(1) == ([] if expected is None else [expected])
        if expected is None:
            break
        search.record(expected, S if expected in skipped else deterministic(first_bad)(expected))


@given(st.data(), st.integers(3, 2000), st.integers(1, 6))
def test_runs_in_flight_are_dividers_and_never_proposed_twice(data: st.DataObject, size: int, workers: int) -> None:
    """Asynchronous workers: whenever one finishes, ask for one more point around those in flight."""
    first_bad = data.draw(st.integers(1, size - 1))
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    search = KarySearch(size)
    in_flight: list[int] = []
    executions = 0
    while True:
        while len(in_flight) < workers:
            new = search.next_indices(1, frozenset(in_flight))
            if not new:
                break
            assert new[0] not in in_flight and 0 < new[0] < size - 1
            in_flight.append(new[0])
        if not in_flight:
            break
        finished = in_flight.pop(rng.randrange(len(in_flight)))
        search.record(finished, deterministic(first_bad)(finished))
        executions += 1
    assert search.done() and search.answer().culprit == first_bad
    assert executions <= size


def test_kary_points_split_the_range_evenly() -> None:
    assert KarySearch(101).next_indices(3) == [25, 50, 75]
    # 50 in flight: the three new points go where the pieces are largest
    points = KarySearch(101).next_indices(3, frozenset({50}))
    assert 50 not in points and len(points) == 3
    edges = [0, *sorted([*points, 50]), 100]
    assert max(b - a for a, b in zip(edges, edges[1:])) <= 25


def test_kary_steps_around_skips_like_binary() -> None:
    search = KarySearch(1025)
    stretch = range(300, 700)
    drive(search, lambda i: S if i in stretch else deterministic(800)(i), k=3)
    assert search.answer().culprit == 800
    search = KarySearch(1025)
    drive(search, lambda i: S if i in stretch else deterministic(500)(i), k=3)
    answer = search.answer()
    assert answer.culprit is None and 500 in answer.candidates


# -- every strategy: answers stay inside the range ------------------------------------------------

records = st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from([G, B, S])), max_size=40)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["auto", "binary", "kary", "bayes"]), st.integers(2, 300), records, st.integers(1, 4))
def test_every_answer_lies_inside_the_range(name: str, size: int, runs: list[tuple[int, Verdict]], k: int) -> None:
    strategy = make_strategy(name, size, workers=k, flake_rate_prior=0.05)  # type: ignore[arg-type]
    try:
        for index, verdict in runs:
            strategy.record(index % size, verdict)
        for index in strategy.next_indices(k):
            assert 0 <= index < size
        assert in_range(strategy.answer(), size)
    except InconsistentVerdicts:
        assert name in ("binary", "kary")  # they trust every verdict; auto and bayes never raise


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["auto", "bayes"]),
    st.integers(2, 200),
    st.floats(0.0, 0.3),
    st.sampled_from([1.0, 0.8, 0.5]),
    st.data(),
)
def test_noisy_searches_end_inside_the_range(
    name: str, size: int, flake: float, after: float, data: st.DataObject
) -> None:
    first_bad = data.draw(st.integers(1, size - 1))
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    strategy = make_strategy(name, size, max_runs=200, flake_rate_prior=flake)  # type: ignore[arg-type]
    drive(
        strategy,
        lambda i: B if rng.random() < (after if i >= first_bad else flake) else G,
        k=data.draw(st.integers(1, 3)),
    )
    assert strategy.done()
    assert in_range(strategy.answer(), size)


# -- the Bayesian posterior ----------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.integers(2, 500), st.floats(0.0, 0.5), records)
def test_posterior_sums_to_one_after_any_records(size: int, flake: float, runs: list[tuple[int, Verdict]]) -> None:
    search = BayesianSearch(size, flake)
    for index, verdict in runs:
        search.record(index % size, verdict)
        posterior = search.posterior()
        assert len(posterior) == size
        assert abs(sum(posterior) - 1.0) < 1e-9
        assert all(p >= 0.0 for p in posterior)
    components = search.components()
    assert abs(components["none"] + sum(components["hard"]) + sum(components["intermittent"]) - 1.0) < 1e-9  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(st.integers(2, 300), st.sampled_from([0.0, 0.01, 0.2]), records)
def test_hard_model_gives_no_weight_to_a_culprit_a_later_pass_ruled_out(
    size: int, flake: float, runs: list[tuple[int, Verdict]]
) -> None:
    search = BayesianSearch(size, flake)
    for index, verdict in runs:
        search.record(index % size, verdict)
    hard = search.components()["hard"]
    passes = [index % size for index, verdict in runs if verdict is G]
    for culprit in range(1, size):
        if any(j >= culprit for j in passes):
            assert hard[culprit] == 0.0  # type: ignore[index]
        else:
            assert hard[culprit] > 0.0  # type: ignore[index]


def test_posterior_index_zero_is_no_culprit_and_moves_with_the_evidence() -> None:
    search = BayesianSearch(65, flake_rate=0.1)
    search.record(64, B)  # the bad end failed once
    before = search.posterior()[0]
    for _ in range(6):
        search.record(64, G)  # ... and then passes: the failure looks flaky
    assert search.posterior()[0] > before
    assert search.components()["hard"] == [0.0] * 65


def test_a_skipped_index_stays_a_possible_culprit_but_is_not_probed_again() -> None:
    search = BayesianSearch(33, flake_rate=0.05)
    search.record(16, S)
    assert search.posterior()[16] > 0
    for _ in range(20):
        batch = search.next_indices(3)
        assert 16 not in batch
        for index in batch:
            search.record(index, deterministic(16)(index) if index != 16 else S)
    assert 16 in search.answer().candidates or search.answer().culprit == 16


def test_bayesian_batches_and_runs_in_flight() -> None:
    search = BayesianSearch(1025, flake_rate=0.05)
    search.record(1024, B)  # the bad end seen failing, as a session verifies it first
    batch = search.next_indices(3)
    assert 0 < batch[0] < batch[1] < batch[2] < 1024
    more = search.next_indices(2, frozenset(batch))
    assert len(more) == 2 and all(0 <= i < 1025 and i not in batch for i in more)
    search.max_runs = 3
    assert len(search.next_indices(5)) == 2
    search.record(1, G)
    search.record(2, G)
    assert search.done() and search.next_indices(3) == []


def test_replaying_the_same_records_gives_the_same_decisions() -> None:
    rng = random.Random(5)
    one = BayesianSearch(200, flake_rate=0.1)
    runs = []
    while not one.done():
        index = one.next_indices(1)[0]
        verdict = B if index >= 77 or rng.random() < 0.1 else G
        runs.append((index, verdict))
        one.record(index, verdict)
    two = BayesianSearch(200, flake_rate=0.1)
    for index, verdict in reversed(runs):  # the posterior depends on the counts only
        two.record(index, verdict)
    assert len(runs) > 5 and one.posterior() == two.posterior()
    assert one.answer() == two.answer()
    one.confidence = two.confidence = 0.999
    assert one.next_indices(1) == two.next_indices(1)


@pytest.mark.parametrize("flake", [0.05, 0.2])
def test_bayesian_names_a_hard_culprit_through_flaky_failures(flake: float) -> None:
    right = 0
    for seed in range(20):
        rng = random.Random(seed)
        culprit = rng.randint(1, 256)
        search = BayesianSearch(257, flake_rate=flake)
        search.record(256, B)
        drive(search, lambda i, culprit=culprit, rng=rng: B if i >= culprit or rng.random() < flake else G)
        answer = search.answer()
        right += answer.culprit == culprit
        assert answer.confidence >= 0.95
    assert right >= 18


def test_the_guard_asks_the_parent_again_until_an_intermittent_culprit_there_is_unlikely() -> None:
    """Under the hard model one pass at 6 clears it; an intermittent bug at 6 may pass there by
    luck, at any rate the guard allows: with its uniform prior three passes are not enough."""
    search = BayesianSearch(16, flake_rate=0.01)
    for index, verdict in [(0, G), (15, B), (8, B), (4, G), (6, G), (7, B), (6, G), (6, G)]:
        search.record(index, verdict)
    for _ in range(2):
        assert search.posterior()[7] >= 0.95 and not search.done()
        assert search.next_indices(1) == [6]
        search.record(6, G)
    assert search.done()
    answer = search.answer()
    assert answer.culprit == 7 and 0.95 <= answer.confidence < search.posterior()[7]


def test_lucky_passes_after_an_intermittent_culprit_do_not_name_a_later_commit() -> None:
    """Runs from a simulated bug at 15 failing half the time, no flakes: every run at 59-70
    passed by luck. Two failures after 71 leave the hard model likely, and with the search's
    prior (rates near one) in the guard, five passes at 70 named 71 at 0.968; at a rate the
    guard takes as likely as any other, an earlier intermittent culprit is not ruled out."""
    search = BayesianSearch(129, flake_rate=0.0)
    search.record(128, B)
    for index, verdict in [
        (59, G),
        (89, B),
        (72, B),
        (64, G),
        (68, G),
        (70, G),
        (71, B),
        (70, G),
        (70, G),
        (70, G),
        (70, G),
    ]:
        search.record(index, verdict)
    assert search.posterior()[71] >= 0.95
    assert not search.done()
    assert search.answer().confidence < 0.95


def test_bayesian_answers_no_culprit_when_every_index_only_flakes() -> None:
    flaky = 0
    for seed in range(10):
        rng = random.Random(seed)
        search = BayesianSearch(129, flake_rate=0.1, max_runs=400)
        search.record(128, B)  # the one failure that made someone start a bisect
        drive(search, lambda i, rng=rng: B if rng.random() < 0.1 else G)
        answer = search.answer()
        flaky += answer.no_culprit
        if answer.no_culprit:
            assert answer.culprit is None and answer.candidates == ()
    assert flaky >= 9


def test_intermittent_answer_carries_failure_rates() -> None:
    rng = random.Random(3)
    search = BayesianSearch(65, flake_rate=0.0, max_runs=500)
    search.record(64, B)
    drive(search, lambda i: B if i >= 40 and rng.random() < 0.5 else G)
    answer = search.answer()
    assert answer.culprit == 40 and answer.confidence >= 0.95
    assert answer.fail_rate_before == 0.0
    assert answer.fail_rate_after is not None and 0.2 < answer.fail_rate_after < 0.8


def _intermittent_runs(seed: int, margin: float) -> tuple[BayesianSearch, list[tuple[int, Verdict]]]:
    """Drive a search on an intermittent bug at 40 (runs there fail half the time, none before)."""
    rng = random.Random(seed)
    search = BayesianSearch(65, flake_rate=0.0, max_runs=500, intermittent_margin=margin)
    search.record(64, B)
    runs: list[tuple[int, Verdict]] = []
    while not search.done():
        index = search.next_indices(1)[0]
        runs.append((index, B if index >= 40 and rng.random() < 0.5 else G))
        search.record(*runs[-1])
    return search, runs


def test_with_the_hard_model_ruled_out_a_culprit_must_clear_the_intermittent_margin() -> None:
    loose, runs = _intermittent_runs(seed=1, margin=1.0)
    assert loose.answer().culprit == 40 and 0.95 <= loose.answer().confidence < 0.99
    strict = BayesianSearch(65, flake_rate=0.0, max_runs=500)
    strict.record(64, B)
    for index, verdict in runs:
        strict.record(index, verdict)
    assert sum(strict.components()["hard"]) < 0.5  # type: ignore[arg-type]
    assert not strict.done()
    rng = random.Random(100)
    drive(strict, lambda i: B if i >= 40 and rng.random() < 0.5 else G)
    assert strict.answer().culprit == 40 and strict.answer().confidence >= 0.99


def test_while_the_hard_model_holds_the_margin_changes_nothing() -> None:
    loose, runs = _intermittent_runs(seed=4, margin=1.0)
    strict, same = _intermittent_runs(seed=4, margin=5.0)
    assert sum(strict.components()["hard"]) >= 0.5  # type: ignore[arg-type]
    assert same == runs and strict.answer() == loose.answer()


def test_a_margin_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="margin"):
        BayesianSearch(10, intermittent_margin=0.5)


# -- auto -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("runs", "reason"),
    [
        ([(5, G), (5, B)], "both good and bad"),
        ([(3, B), (6, G)], "after it is good"),
        ([(0, B)], "good end failed"),
        ([(9, G)], "bad end passed"),
    ],
)
def test_auto_switches_to_bayes_on_a_contradiction_and_replays(runs: list[tuple[int, Verdict]], reason: str) -> None:
    auto = AutoSearch(10, flake_rate_prior=0.0)
    for index, verdict in runs:
        assert auto.phase == "binary"
        auto.record(index, verdict)
    assert auto.phase == "bayes" and reason in (auto.switch_reason or "")
    fresh = BayesianSearch(10, flake_rate=0.0)
    for index, verdict in runs:
        fresh.record(index, verdict)
    assert auto.bayes is not None and auto.bayes.posterior() == fresh.posterior()
    assert auto.next_indices(1) == fresh.next_indices(1)


def test_auto_starts_bayesian_when_history_says_the_probe_flakes() -> None:
    assert AutoSearch(100, flake_rate_prior=0.05).phase == "bayes"
    assert AutoSearch(100, flake_rate_prior=0.001).phase == "binary"
    assert AutoSearch(100).phase == "binary"


def test_auto_confirmation_catches_a_false_failure() -> None:
    """A flaky failure at index 50 (true culprit 70) sends the bisection to 50; the rerun of 50 passes."""
    auto = AutoSearch(101, flake_rate_prior=0.004)
    flaked = False

    def verdict_of(i: int) -> Verdict:
        nonlocal flaked
        if i == 50 and not flaked:
            flaked = True
            return B
        return deterministic(70)(i)

    search = BinarySearch(101)
    drive(search, verdict_of)
    assert search.answer().culprit == 50  # plain bisection is fooled
    flaked = False
    drive(auto, verdict_of)
    assert auto.phase == "bayes" and auto.answer().culprit == 70 and auto.answer().confidence >= 0.95


def test_auto_confirms_the_culprit_only_where_history_shows_flakes() -> None:
    for prior, reruns in ((None, 1), (0.0, 1), (0.004, 2)):
        auto = AutoSearch(101, flake_rate_prior=prior)
        drive(auto, deterministic(37))
        assert [i for i, _ in auto.runs].count(37) == reruns


def test_auto_answer_in_budget() -> None:
    auto = AutoSearch(1025, max_runs=3)
    drive(auto, deterministic(500))
    assert auto.done() and len(auto.runs) == 3
    assert in_range(auto.answer(), 1025) and auto.answer().culprit is None


# -- factory --------------------------------------------------------------------------------------


def test_make_strategy() -> None:
    for name, cls in (("auto", AutoSearch), ("binary", BinarySearch), ("kary", KarySearch), ("bayes", BayesianSearch)):
        strategy = make_strategy(name, 17, workers=2, confidence=0.9, max_runs=50, flake_rate_prior=0.02)  # type: ignore[arg-type]
        assert isinstance(strategy, cls) and isinstance(strategy, Strategy) and strategy.name == name
    assert make_strategy("bayes", 17).flake_rate == 0.05  # type: ignore[attr-defined]
    with pytest.raises(ValueError):
        make_strategy("linear", 17)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        make_strategy("auto", 17, workers=0)
    with pytest.raises(ValueError):
        KarySearch(17).next_indices(0)


def test_bounds_helper() -> None:
    assert [rounds_bound(n, 1) for n in (1, 2, 3, 4, 5, 1024, 1025)] == [0, 1, 2, 2, 3, 10, 11]
    assert rounds_bound(1024, 3) == math.ceil(math.log(1024, 4)) == 5
