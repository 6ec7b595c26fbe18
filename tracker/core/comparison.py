"""Two revisions side by side, as ``asv compare`` puts them: each probe's cases at A and at B, every
metric with the ratio B/A, and the order that puts what got worse first.

Rows are ranked by:

1. the kind of change of the case's outcome from A to B: first a case that passed at A and fails,
   crashes or times out at B (``broke``), then one whose outcome got worse in another way (a pass
   that became untestable or not applicable, an untestable case that fails), then one whose outcome
   changed without getting better or worse (a failure that became a crash), then one that got
   better, last the unchanged ones;
2. within a kind, the largest worsening ratio B/A of an error metric, largest first (a value that
   was 0 at A and is not at B, or that became NaN, is an infinite worsening); rows without an
   error metric known at both sides come after those with one;
3. then by probe and case name, so that the order is total.

An error metric is one where more is worse: its name, split at ``_``, holds one of
``ERROR_WORDS`` (``rel_err``, ``max_abs_err``, ``mismatch_frac``, ``nonfinite``, ``failed_replays``)
and does not end in ``TOLERANCE_SUFFIX`` (``rel_err_tol`` is the bound ``rel_err`` was judged against). Other
metrics are shown with their ratio but do not rank.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from tracker.core.exits import ExitStatus
from tracker.core.json_schema import versioned
from tracker.core.measurements import DURATION, TOLERANCE_SUFFIX
from tracker.core.records import CommitInfo
from tracker.core.verdicts import BAD_OUTCOMES, Outcome, Verdict

ERROR_WORDS = frozenset({"err", "error", "errors", "mismatch", "nonfinite", "nan", "nans", "failed"})


def is_error_metric(name: str) -> bool:
    """Whether more of metric ``name`` is worse (the module's docstring)."""
    words = name.lower().split("_")
    return not ERROR_WORDS.isdisjoint(words) and not name.endswith(TOLERANCE_SUFFIX)


class Provenance(enum.StrEnum):
    """Whether a side's result was run by this comparison or taken from the store."""

    MEASURED = "measured"
    REUSED = "reused"


class ChangeKind(enum.StrEnum):
    """How a case's outcome changed from A to B, in ranking order (the module's docstring)."""

    BROKE = "broke"
    WORSE = "worse"
    CHANGED = "changed"
    BETTER = "better"
    SAME = "same"


RANK = {kind: position for position, kind in enumerate(ChangeKind)}


def severity(outcome: Outcome | None) -> int:
    """0 a pass, 1 no judgement (untestable, not applicable, no such case), 2 a bad outcome."""
    if outcome is Outcome.PASS:
        return 0
    return 2 if outcome in BAD_OUTCOMES else 1


def change_of(a: Outcome | None, b: Outcome | None) -> ChangeKind:
    if a is Outcome.PASS and b in BAD_OUTCOMES:
        return ChangeKind.BROKE
    if a == b:
        return ChangeKind.SAME
    step = severity(b) - severity(a)
    return ChangeKind.WORSE if step > 0 else ChangeKind.BETTER if step < 0 else ChangeKind.CHANGED


@dataclass(frozen=True)
class MetricChange:
    """One metric at A and at B; a side where the case did not report it is None."""

    name: str
    a: float | None
    b: float | None

    @property
    def ratio(self) -> float | None:
        """B/A; 1 where both are 0; None where it says nothing (``note`` says why); infinite where A is 0."""
        if self.note not in ("", "A is 0"):
            return None
        assert self.a is not None and self.b is not None
        if self.a == 0:
            return 1.0 if self.b == 0 else math.copysign(math.inf, self.b)
        return self.b / self.a

    @property
    def note(self) -> str:
        """Why the ratio is no plain number: "missing at A", "NaN at B", "A is 0"; empty when it is one."""
        for side, value in (("A", self.a), ("B", self.b)):
            if value is None:
                return f"missing at {side}"
            if math.isnan(value):
                return f"NaN at {side}"
        return "A is 0" if self.a == 0 and self.b != 0 else ""

    @property
    def worsening(self) -> float | None:
        """The ratio an error metric grew by: infinite where it left 0 or became NaN; None where A is unknown."""
        if self.a is None or self.b is None or math.isnan(self.a):
            return None
        if math.isnan(self.b):
            return math.inf
        return self.ratio

    def to_json(self) -> dict[str, Any]:
        ratio = self.ratio
        return {
            "name": self.name,
            "a": _json_number(self.a),
            "b": _json_number(self.b),
            "ratio": ratio if ratio is not None and math.isfinite(ratio) else None,
            "note": self.note or None,
        }


def _json_number(value: float | None) -> float | None:
    """JSON has no NaN or infinity: those are null, and the metric's ``note`` says why."""
    return value if value is not None and math.isfinite(value) else None


@dataclass(frozen=True)
class CaseAt:
    """One case at one revision: its outcome, why it did not pass, its metrics and how long it ran."""

    outcome: Outcome
    signature: str | None
    metrics: dict[str, float]
    duration_s: float | None

    def to_json(self, source: Provenance) -> dict[str, Any]:
        return {
            "outcome": self.outcome.value,
            "source": source.value,
            "signature": self.signature,
            "duration_s": self.duration_s,
        }


@dataclass(frozen=True)
class ProbeAt:
    """A probe at one revision: its verdict, whether its result was run now or taken from the store,
    and its cases by id."""

    sha: str
    verdict: Verdict
    source: Provenance
    cases: dict[str, CaseAt]

    @property
    def unjudged(self) -> str | None:
        """Why no case judged the revision: "untestable" where one could not run (its code does not
        import, say), else "skipped" (no case applies here, or a command said so); None where one did."""
        if self.verdict is not Verdict.SKIP:
            return None
        return "untestable" if any(c.outcome is Outcome.ERROR for c in self.cases.values()) else "skipped"

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict.value, "source": self.source.value, "unjudged": self.unjudged}


@dataclass(frozen=True)
class CaseRow:
    """One case of one probe at A and at B; a side is None where the probe has no such case there."""

    probe: str
    case: str
    a: CaseAt | None
    b: CaseAt | None
    source_a: Provenance
    source_b: Provenance

    @property
    def change(self) -> ChangeKind:
        return change_of(self.a.outcome if self.a else None, self.b.outcome if self.b else None)

    @property
    def metrics(self) -> list[MetricChange]:
        """Every metric either side reported, in the order the cases reported them."""
        a, b = (self.a.metrics if self.a else {}), (self.b.metrics if self.b else {})
        return [MetricChange(name, a.get(name), b.get(name)) for name in dict.fromkeys([*a, *b])]

    @property
    def duration(self) -> MetricChange:
        return MetricChange(DURATION, self.a.duration_s if self.a else None, self.b.duration_s if self.b else None)

    @property
    def worsening(self) -> float | None:
        """The largest worsening ratio of an error metric known at both sides; None where none is."""
        ratios = [m.worsening for m in self.metrics if is_error_metric(m.name)]
        known = [r for r in ratios if r is not None]
        return max(known) if known else None

    def rank_key(self) -> tuple[int, float, str, str]:
        worsening = self.worsening
        return RANK[self.change], math.inf if worsening is None else -worsening, self.probe, self.case

    def to_json(self) -> dict[str, Any]:
        return {
            "probe": self.probe,
            "case": self.case,
            "change": self.change.value,
            "a": self.a.to_json(self.source_a) if self.a else None,
            "b": self.b.to_json(self.source_b) if self.b else None,
            "metrics": [m.to_json() for m in self.metrics],
            "duration": self.duration.to_json(),
        }


@dataclass(frozen=True)
class ProbePair:
    """One probe at A and at B."""

    probe: str
    a: ProbeAt
    b: ProbeAt

    @property
    def rows(self) -> list[CaseRow]:
        """A row for every case either side has, in the probe's order."""
        a, b = self.a, self.b
        cases = dict.fromkeys([*a.cases, *b.cases])
        return [CaseRow(self.probe, case, a.cases.get(case), b.cases.get(case), a.source, b.source) for case in cases]

    @property
    def broke(self) -> bool:
        """Good at A, bad at B."""
        return self.a.verdict is Verdict.GOOD and self.b.verdict is Verdict.BAD

    def to_json(self) -> dict[str, Any]:
        return {"probe": self.probe, "a": self.a.to_json(), "b": self.b.to_json()}


def ranked(rows: list[CaseRow]) -> list[CaseRow]:
    """``rows`` with what got worse first (the module's docstring)."""
    return sorted(rows, key=CaseRow.rank_key)


@dataclass(frozen=True)
class Comparison:
    """Each probe at revisions ``a`` and ``b``."""

    a: CommitInfo
    b: CommitInfo
    probes: tuple[ProbePair, ...]

    @cached_property
    def rows(self) -> list[CaseRow]:
        return ranked([row for pair in self.probes for row in pair.rows])

    @property
    def exit_status(self) -> ExitStatus:
        """BAD when something that passed at A fails at B: a case, or a probe's verdict; else OK."""
        broke = any(row.change is ChangeKind.BROKE for row in self.rows) or any(p.broke for p in self.probes)
        return ExitStatus.BAD if broke else ExitStatus.OK

    def to_json(self) -> dict[str, Any]:
        return versioned(
            {
                "a": {"sha": self.a.sha, "subject": self.a.subject},
                "b": {"sha": self.b.sha, "subject": self.b.subject},
                "exit_status": int(self.exit_status),
                "probes": [pair.to_json() for pair in self.probes],
                "rows": [row.to_json() for row in self.rows],
            }
        )
