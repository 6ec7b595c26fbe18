"""The pure side of ``regtrack compare``: ratios with zero, missing and NaN values, and the ranking
that puts what got worse first."""

from __future__ import annotations

import math
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from tracker.core.comparison import (
    RANK,
    CaseAt,
    CaseRow,
    ChangeKind,
    Comparison,
    MetricChange,
    ProbeAt,
    ProbePair,
    Provenance,
    change_of,
    is_error_metric,
    ranked,
)
from tracker.core.exits import ExitStatus
from tracker.core.records import CommitInfo
from tracker.core.verdicts import Outcome, verdict_of


def test_ratio_is_b_over_a() -> None:
    change = MetricChange("rel_err", 2e-7, 1.0)
    assert change.ratio == 5e6 and change.note == "" and change.worsening == 5e6


def test_zero_at_both_sides_is_no_change() -> None:
    assert MetricChange("nonfinite", 0.0, 0.0).ratio == 1.0


def test_leaving_zero_is_an_infinite_worsening_without_a_number_in_json() -> None:
    change = MetricChange("mismatch_frac", 0.0, 0.8)
    assert change.ratio == math.inf and change.note == "A is 0" and change.worsening == math.inf
    assert change.to_json() == {"name": "mismatch_frac", "a": 0.0, "b": 0.8, "ratio": None, "note": "A is 0"}


def test_a_missing_side_has_no_ratio_and_says_which() -> None:
    assert MetricChange("rel_err", None, 1.0).note == "missing at A"
    assert MetricChange("rel_err", 1.0, None).ratio is None
    assert MetricChange("rel_err", 1.0, None).worsening is None


def test_nan_has_no_ratio_and_a_metric_that_became_nan_is_worse_without_bound() -> None:
    became = MetricChange("rel_err", 1e-7, math.nan)
    assert became.ratio is None and became.note == "NaN at B" and became.worsening == math.inf
    assert became.to_json()["b"] is None
    assert MetricChange("rel_err", math.nan, 1.0).worsening is None


def test_error_metrics_are_those_where_more_is_worse() -> None:
    errors = ["rel_err", "max_abs_err", "mismatch_frac", "nonfinite", "failed_replays", "failed_checks"]
    assert all(is_error_metric(name) for name in errors)
    assert not any(is_error_metric(name) for name in ["replays", "checks", "baked_q_len", "rel_err_tol", "duration_s"])


def test_outcome_changes() -> None:
    assert change_of(Outcome.PASS, Outcome.CRASH) is ChangeKind.BROKE
    assert change_of(Outcome.PASS, Outcome.ERROR) is ChangeKind.WORSE
    assert change_of(Outcome.ERROR, Outcome.FAIL) is ChangeKind.WORSE
    assert change_of(Outcome.FAIL, Outcome.TIMEOUT) is ChangeKind.CHANGED
    assert change_of(Outcome.FAIL, Outcome.PASS) is ChangeKind.BETTER
    assert change_of(Outcome.PASS, None) is ChangeKind.WORSE
    assert change_of(Outcome.SKIP, Outcome.SKIP) is ChangeKind.SAME


outcomes = st.sampled_from(list(Outcome))
values = st.one_of(st.just(0.0), st.just(math.nan), st.floats(1e-9, 1e3))
metric_names = st.sampled_from(["rel_err", "max_abs_err", "replays"])
cases = st.one_of(st.none(), st.builds(CaseAt, outcomes, st.none(), st.dictionaries(metric_names, values), st.none()))
rows = st.lists(
    st.builds(
        CaseRow,
        st.sampled_from(["p", "q"]),
        st.text("abc", min_size=1, max_size=3),
        cases,
        cases,
        st.sampled_from(list(Provenance)),
        st.sampled_from(list(Provenance)),
    ),
    max_size=12,
)


@given(rows)
def test_ranking_puts_broken_cases_first_then_other_changes_then_the_largest_worsening(found: list[CaseRow]) -> None:
    order = ranked(found)
    assert sorted(map(id, order)) == sorted(map(id, found))
    kinds = [RANK[row.change] for row in order]
    assert kinds == sorted(kinds)
    for before, after in zip(order, order[1:]):
        if before.change is after.change and after.worsening is not None:
            assert before.worsening is not None and before.worsening >= after.worsening
    broke = [row for row in order if row.change is ChangeKind.BROKE]
    assert order[: len(broke)] == broke


COMMIT = CommitInfo("a" * 40, (), "A", "someone", datetime(2026, 1, 1, tzinfo=UTC))


def probe_at(sha: str, case_outcomes: dict[str, Outcome]) -> ProbeAt:
    at = {case: CaseAt(outcome, None, {}, None) for case, outcome in case_outcomes.items()}
    return ProbeAt(sha, verdict_of(case_outcomes.values()), Provenance.MEASURED, at)


@given(st.dictionaries(st.sampled_from(["x", "y", "z"]), st.tuples(outcomes, outcomes), min_size=1))
def test_exit_1_exactly_when_something_that_passed_at_a_fails_at_b(
    case_outcomes: dict[str, tuple[Outcome, Outcome]],
) -> None:
    a = probe_at("a", {case: pair[0] for case, pair in case_outcomes.items()})
    b = probe_at("b", {case: pair[1] for case, pair in case_outcomes.items()})
    comparison = Comparison(COMMIT, COMMIT, (ProbePair("p", a, b),))
    case_broke = any(change_of(*pair) is ChangeKind.BROKE for pair in case_outcomes.values())
    probe_broke = a.verdict.value == "good" and b.verdict.value == "bad"
    expected = ExitStatus.BAD if case_broke or probe_broke else ExitStatus.OK
    assert comparison.exit_status is expected


def test_a_probe_no_case_judged_says_why() -> None:
    assert probe_at("a", {"x": Outcome.ERROR, "y": Outcome.SKIP}).unjudged == "untestable"
    assert probe_at("a", {"x": Outcome.SKIP}).unjudged == "skipped"
    assert probe_at("a", {"x": Outcome.PASS, "y": Outcome.SKIP}).unjudged is None
