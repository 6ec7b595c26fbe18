"""What a strategy says of the road ahead: ``remaining()`` candidates and ``rounds_left(k)``.

A search is driven here as the session drives it: the ends are recorded first, then the runs the
strategy asks for, answered by an oracle (a first bad index, optionally a stretch of untestable
indices, optionally flakes).
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.core.verdicts import Verdict
from tracker.search.protocol import rounds_to_split
from tracker.search.strategies import BayesianSearch, Strategy, make_strategy

G, B, S = Verdict.GOOD, Verdict.BAD, Verdict.SKIP


def oracle(first_bad: int, skipped: range = range(0)) -> Callable[[int], Verdict]:
    return lambda i: S if i in skipped else B if i >= first_bad else G


def started(name: str, size: int) -> Strategy:
    strategy = make_strategy(name, size, flake_rate_prior=0.0 if name == "auto" else None)  # type: ignore[arg-type]
    strategy.record(0, G)
    strategy.record(size - 1, B)
    return strategy


def rounds_of(
    strategy: Strategy, verdict_of: Callable[[int], Verdict], k: int, seen: Callable[[Strategy], None]
) -> int:
    rounds = 0
    while not strategy.done() and (batch := strategy.next_indices(k)):
        rounds += 1
        for index in batch:
            strategy.record(index, verdict_of(index))
        seen(strategy)
    return rounds


@given(st.integers(1, 10**6), st.integers(1, 9))
def test_rounds_to_split_is_the_integer_ceiling_of_the_logarithm(n: int, k: int) -> None:
    rounds = rounds_to_split(n, k)
    assert (k + 1) ** rounds >= n
    assert rounds == 0 or (k + 1) ** (rounds - 1) < n


def test_rounds_to_split_of_a_perfect_power_is_exact() -> None:
    assert rounds_to_split(1000, 9) == 3  # math.log(1000, 10) is 2.9999999999999996
    assert rounds_to_split(1024, 1) == 10 and rounds_to_split(1025, 1) == 11


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["binary", "kary", "auto"]), st.integers(2, 2000), st.integers(1, 6), st.data())
def test_deterministic_search_never_gains_candidates_and_keeps_its_round_estimate(
    name: str, size: int, k: int, data: st.DataObject
) -> None:
    first_bad = data.draw(st.integers(1, size - 1))
    skip_from = data.draw(st.integers(1, size - 1))
    skipped = range(skip_from, min(skip_from + data.draw(st.integers(0, 20)), size - 1))
    strategy = started(name, size)
    counts = [strategy.remaining()]
    estimate = strategy.rounds_left(k)

    def seen(s: Strategy) -> None:
        counts.append(s.remaining())

    rounds = rounds_of(strategy, oracle(first_bad, skipped), k, seen)
    assert counts == sorted(counts, reverse=True), "the candidates left never grow"
    assert counts[0] == size - 1
    assert strategy.remaining() == len(strategy.answer().candidates)
    assert strategy.rounds_left(k) == 0
    if not skipped:
        assert strategy.remaining() == 1
        assert rounds <= estimate, "with no skips the first estimate is an upper bound"


@given(st.integers(2, 3000), st.data())
def test_binary_on_a_deterministic_history_takes_the_rounds_it_announced(size: int, data: st.DataObject) -> None:
    first_bad = data.draw(st.integers(1, size - 1))
    strategy = started("binary", size)
    announced = strategy.rounds_left(1)
    assert announced == rounds_to_split(size - 1, 1)
    left: list[int] = []
    rounds = rounds_of(strategy, oracle(first_bad), 1, lambda s: left.append(s.rounds_left(1)))
    assert announced - 1 <= rounds <= announced
    assert all(later <= earlier for earlier, later in zip([announced, *left], left))


@pytest.mark.parametrize(("flake_rate_prior", "confirmation"), [(None, 0), (0.0, 0), (0.004, 1)])
def test_auto_announces_and_takes_its_confirmation_run_only_where_history_shows_flakes(
    flake_rate_prior: float | None, confirmation: int
) -> None:
    strategy = make_strategy("auto", 65, flake_rate_prior=flake_rate_prior)
    strategy.record(0, G)
    strategy.record(64, B)
    assert strategy.rounds_left(1) == 6 + confirmation
    assert rounds_of(strategy, oracle(40), 1, lambda s: None) == 6 + confirmation


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 300), st.sampled_from([0.0, 0.05, 0.2]), st.integers(1, 4), st.data())
def test_bayesian_estimate_is_zero_exactly_when_done_and_one_candidate_once_sure(
    size: int, flake: float, k: int, data: st.DataObject
) -> None:
    first_bad = data.draw(st.integers(1, size - 1))
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    strategy = BayesianSearch(size, flake, max_runs=400)
    strategy.record(0, G)
    strategy.record(size - 1, B)

    def noisy(i: int) -> Verdict:
        bad = i >= first_bad
        return B if bad != (rng.random() < flake) else G

    def seen(s: Strategy) -> None:
        assert 1 <= s.remaining() <= size
        assert (s.rounds_left(k) == 0) == s.done()

    assert strategy.rounds_left(k) >= rounds_to_split(size - 1, k)
    rounds_of(strategy, noisy, k, seen)
    if strategy.runs < 400:
        assert strategy.remaining() == 1


@pytest.mark.parametrize("name", ["binary", "kary", "auto", "bayes"])
def test_rounds_left_refuses_no_points(name: str) -> None:
    with pytest.raises(ValueError):
        started(name, 10).rounds_left(0)
