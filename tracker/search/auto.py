"""Bisection while the verdicts agree; Bayesian after a contradiction or when history says the probe flakes."""

from __future__ import annotations

from tracker.core.verdicts import Verdict
from tracker.search.bayes import BayesianSearch
from tracker.search.binary import BinarySearch
from tracker.search.protocol import StrategyAnswer, check_k


class AutoSearch:
    """The default: plain bisection while the verdicts are consistent, Bayesian once they are not.

    Binary phase: :class:`BinarySearch` (k-ary for several workers). Where history shows the probe
    flaking, though too rarely for the Bayesian search (``0 < flake_rate_prior <= flaky_threshold``),
    one confirmation rerun of the culprit follows, since a false failure is what sends a bisection
    astray. Where history shows no flake (no history, or a rate of 0) the search trusts its results
    as ``git bisect`` does until they contradict: a range costs at most ceil(log2 n) runs,
    n = size - 1.

    It switches to :class:`BayesianSearch`, replaying every verdict so far, when a contradiction
    appears: an index both GOOD and BAD (a rerun or a stored result disagrees), a BAD before a
    GOOD in index order, the good end BAD or the bad end GOOD; or from the start when
    ``flake_rate_prior`` (the probe's observed flake rate in history) is above ``flaky_threshold``.
    The default threshold 0.005 sends a 1 % flaky probe to the Bayesian search: at 1 % a
    10-probe bisection meets a false verdict about 5 % of the time, too often for the one check.
    ``max_runs`` counts every recorded verdict in both phases. ``switch_reason`` says why it
    switched (None while binary).
    """

    name = "auto"

    def __init__(
        self,
        size: int,
        confidence: float = 0.95,
        flake_rate_prior: float | None = None,
        max_runs: int | None = None,
        *,
        flaky_threshold: float = 0.005,
        **bayes_options: object,
    ) -> None:
        self.size = size
        self.confidence = confidence
        self.flake_rate_prior = flake_rate_prior
        self.max_runs = max_runs
        self.flaky_threshold = flaky_threshold
        self.bayes_options = bayes_options
        self.binary = BinarySearch(size)
        self.bayes: BayesianSearch | None = None
        self.switch_reason: str | None = None
        self.runs: list[tuple[int, Verdict]] = []
        self._max_good, self._min_bad = -1, size
        if flake_rate_prior is not None and flake_rate_prior > flaky_threshold:
            self._switch(f"the probe's flake rate in history is {flake_rate_prior:g}")

    @property
    def phase(self) -> str:
        return "binary" if self.bayes is None else "bayes"

    def _switch(self, reason: str) -> None:
        flake = self.flake_rate_prior if self.flake_rate_prior is not None else 0.05
        self.bayes = BayesianSearch(self.size, flake, self.confidence, self.max_runs, **self.bayes_options)  # type: ignore[arg-type]
        self.switch_reason = reason
        for index, verdict in self.runs:
            self.bayes.record(index, verdict)

    @property
    def confirms(self) -> bool:
        """Whether the culprit is rerun once before it is named: the history shows flakes."""
        return self.flake_rate_prior is not None and self.flake_rate_prior > 0

    def _confirm_index(self) -> int:
        return self.binary.bounds()[1]

    def record(self, index: int, verdict: Verdict) -> None:
        if not 0 <= index < self.size:
            raise IndexError(f"index {index} outside 0..{self.size - 1}")
        self.runs.append((index, verdict))
        if self.bayes is not None:
            self.bayes.record(index, verdict)
            return
        if verdict is Verdict.GOOD:
            self._max_good = max(self._max_good, index)
        elif verdict is Verdict.BAD:
            self._min_bad = min(self._min_bad, index)
        reason = None
        if verdict is Verdict.BAD and index == 0:
            reason = "the good end failed"
        elif verdict is Verdict.GOOD and index == self.size - 1:
            reason = "the bad end passed"
        elif self._min_bad <= self._max_good:
            reason = (
                f"index {index} is both good and bad"
                if self._min_bad == self._max_good
                else f"index {self._min_bad} is bad but index {self._max_good} after it is good"
            )
        if reason is not None:
            self._switch(reason)
            return
        self.binary.record(index, verdict)

    def _budget_spent(self) -> bool:
        return self.max_runs is not None and len(self.runs) >= self.max_runs

    def done(self) -> bool:
        if self.bayes is not None:
            return self.bayes.done()
        return self._budget_spent() or (self.binary.done() and self._confirmed())

    def _confirmed(self) -> bool:
        """No confirmation is asked for, or the culprit has two verdicts (they agree, or the search
        would have switched), whenever they came: a stored result and a fresh one confirm it as
        well as a rerun. At an end of the range the caller's word is the first."""
        if not self.confirms:
            return True
        confirm = self._confirm_index()
        given = confirm in (0, self.size - 1)
        return given + sum(index == confirm for index, _ in self.runs) >= 2

    def next_indices(self, k: int, in_flight: frozenset[int] = frozenset()) -> list[int]:
        check_k(k)
        if self.bayes is not None:
            return self.bayes.next_indices(k, in_flight)
        if self.done():
            return []
        if not self.binary.done():
            return self.binary.next_indices(k, in_flight)
        confirm = self._confirm_index()
        return [] if confirm in in_flight else [confirm]

    def remaining(self) -> int:
        return self.bayes.remaining() if self.bayes is not None else self.binary.remaining()

    def rounds_left(self, k: int) -> int:
        """The binary phase's rounds, and its confirmation where it asks for one, while consistent
        (at most what a deterministic probe takes); the Bayesian estimate after a switch."""
        check_k(k)
        if self.bayes is not None:
            return self.bayes.rounds_left(k)
        if self.done():
            return 0
        rounds = self.binary.rounds_left(k) + (self.confirms and not (self.binary.done() and self._confirmed()))
        return rounds if self.max_runs is None else min(rounds, self.max_runs - len(self.runs))

    def answer(self) -> StrategyAnswer:
        if self.bayes is not None:
            return self.bayes.answer()
        return self.binary.answer()
