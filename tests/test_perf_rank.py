"""The slowdown core: the rank test's calls and effect sizes on known samples, its properties over
any samples (identical samples are never slower, order does not matter, a larger slowdown never
reads as a smaller one), and the sampling rule's counts."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.core.metrics import Direction
from tracker.perf.rank import MIN_SAMPLES, Call, compare
from tracker.perf.sampling import SamplingRule


def noisy(level: float, noise: float, count: int, seed: int) -> list[float]:
    """``count`` samples around ``level`` with relative noise ``noise`` (log-normal)."""
    draw = random.Random(seed)
    return [level * math.exp(draw.gauss(0, noise)) for _ in range(count)]


def test_twenty_percent_slower_through_two_percent_noise_is_slower_with_its_size() -> None:
    found = compare(noisy(100, 0.02, 10, 1), noisy(120, 0.02, 10, 2))
    assert found.call is Call.SLOWER and found.p_slower < 0.01
    assert found.effect.low < 0.2 < found.effect.high and abs(found.effect.estimate - 0.2) < 0.03


def test_the_same_code_measured_twice_is_not_slower() -> None:
    found = compare(noisy(100, 0.01, 10, 1), noisy(100, 0.01, 10, 2))
    assert found.call is Call.NOT_SLOWER and found.p_not_slower < 0.01
    assert found.effect.low < 0 < found.effect.high


def test_a_change_the_size_of_the_threshold_in_noise_as_large_is_unclear() -> None:
    assert compare(noisy(100, 0.05, 10, 1), noisy(105, 0.05, 10, 2), threshold=0.05).call is Call.UNCLEAR


def test_a_slowdown_smaller_than_the_noise_is_never_a_regression() -> None:
    found = compare(noisy(100, 0.10, 10, 3), noisy(103, 0.10, 10, 4), threshold=0.05)
    assert found.call is not Call.SLOWER


def test_throughput_is_slower_when_it_falls() -> None:
    good, step = noisy(1000, 0.02, 10, 5), noisy(800, 0.02, 10, 6)
    found = compare(good, step, direction=Direction.HIGHER_IS_BETTER)
    assert found.call is Call.SLOWER and abs(found.effect.estimate - 0.25) < 0.04
    assert compare(step, good, direction=Direction.HIGHER_IS_BETTER).call is Call.NOT_SLOWER


def test_too_few_samples_make_no_call() -> None:
    found = compare([1.0] * (MIN_SAMPLES - 1), [9.0] * (MIN_SAMPLES - 1))
    assert found.call is Call.UNCLEAR


@pytest.mark.parametrize(
    ("good", "step", "options", "message"),
    [
        ([1.0] * 5, [0.0] * 5, {}, "positive"),
        ([1.0] * 5, [math.inf] * 5, {}, "finite"),
        ([1.0] * 5, [1.0] * 5, {"threshold": 1.5}, "threshold"),
        ([1.0] * 5, [1.0] * 5, {"confidence": 0.3}, "confidence"),
    ],
)
def test_samples_and_settings_that_cannot_be_compared_are_refused(
    good: list[float], step: list[float], options: dict[str, float], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        compare(good, step, **options)


positive = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False)
samples = st.lists(positive, min_size=MIN_SAMPLES, max_size=30)


@settings(max_examples=200, deadline=None)
@given(samples, st.floats(min_value=0, max_value=0.5))
def test_identical_samples_are_never_slower(values: list[float], threshold: float) -> None:
    assert compare(values, list(values), threshold=threshold).call is not Call.SLOWER


@settings(max_examples=100, deadline=None)
@given(samples, samples, st.randoms(use_true_random=False))
def test_the_order_of_the_samples_does_not_matter(good: list[float], step: list[float], draw: random.Random) -> None:
    shuffled_good, shuffled_step = list(good), list(step)
    draw.shuffle(shuffled_good)
    draw.shuffle(shuffled_step)
    assert compare(good, step) == compare(shuffled_good, shuffled_step)


@settings(max_examples=200, deadline=None)
@given(samples, samples, st.floats(min_value=1.0, max_value=10.0))
def test_a_slower_step_never_reads_as_less_slow(good: list[float], step: list[float], factor: float) -> None:
    before, after = compare(good, step), compare(good, [value * factor for value in step])
    assert after.p_slower <= before.p_slower + 1e-12
    assert after.p_not_slower >= before.p_not_slower - 1e-12
    if before.call is Call.SLOWER:
        assert after.call is Call.SLOWER


@settings(max_examples=200, deadline=None)
@given(samples, samples)
def test_the_effect_interval_holds_its_estimate(good: list[float], step: list[float]) -> None:
    effect = compare(good, step).effect
    assert effect.low <= effect.estimate <= effect.high


@settings(max_examples=100, deadline=None)
@given(samples, st.floats(min_value=-0.5, max_value=2.0))
def test_a_uniform_change_is_estimated_as_itself(good: list[float], change: float) -> None:
    effect = compare(good, [value * (1 + change) for value in good]).effect
    assert effect.estimate == pytest.approx(change, rel=1e-6, abs=1e-9)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=MIN_SAMPLES, max_value=40), st.integers(min_value=1, max_value=8), st.data())
def test_the_sampling_rule_grows_to_its_bound_only_while_unclear(first: int, spread: int, data: st.DataObject) -> None:
    rule = SamplingRule(first=first, most=first * spread)
    have, counts = 0, []
    while True:
        call = data.draw(st.sampled_from(list(Call)))
        wanted = rule.more(have, call)
        if wanted is None:
            break
        assert wanted > have and wanted <= rule.most
        if have >= rule.first:
            assert call is Call.UNCLEAR
        have = wanted
        counts.append(have)
        assert len(counts) <= 2 + math.ceil(math.log2(spread))
    assert rule.ambiguous(have, call) == (call is Call.UNCLEAR and have >= rule.most)
    assert have == 0 or have >= rule.first


def test_the_sampling_rule_refuses_bounds_it_cannot_keep() -> None:
    with pytest.raises(ValueError, match="first"):
        SamplingRule(first=MIN_SAMPLES - 1)
    with pytest.raises(ValueError, match="first"):
        SamplingRule(first=20, most=10)
