"""What every section of the HTML report shares: lookups over the report's data, the words of a
probe's story, and the small formatting helpers the templates use as filters.

Nothing here writes markup: the templates under ``templates/`` do, with autoescape on.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tracker.report.model import Cell, ReportData

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"

STATES = ("pass", "fail", "skip", "flaky", "untested")
STATE_LABEL = {"pass": "pass", "fail": "fail", "skip": "untestable", "flaky": "flaky", "untested": "untested"}
STATE_GLYPH = {"pass": "", "fail": "\u2715", "skip": "\u2205", "flaky": "\u2248", "untested": ""}
HEAD_LABEL = {"pass": "passing", "fail": "failing", "skip": "untestable", "flaky": "flaky", "untested": "untested"}
VERDICT_STATE = {"good": "pass", "bad": "fail"}
SHORT = 12


def isolated_plain(text: str) -> str:
    """Text for a tooltip, which holds no markup: between FSI and PDI, so a right-to-left override
    in it cannot reorder what surrounds it."""
    return f"\u2068{text}\u2069"


def short(sha: str) -> str:
    return sha[:SHORT]


def cell_state(cell: Any) -> str:
    return cell.state if cell.state in STATES else "untested"


def when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M")


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def pair_style(kind: str) -> tuple[str, str]:
    """The CSS class and arrow of a revert or re-land pair."""
    return ("revert", "\u21a9") if kind == "reverts" else ("reland", "\u21bb")


def kind_style(kind: str) -> tuple[str, str]:
    """The pill class and arrow of a regression or a fix."""
    return ("s-fail", "\u25bc") if kind == "regression" else ("s-pass", "\u25b2")


@dataclass(frozen=True)
class StoryPart:
    """One transition in a probe's story: ``lead`` is e.g. "bad since"; ``among`` counts the
    commits that may hide it (0 when exact); ``pr`` is "#n" or empty."""

    lead: str
    sha: str
    among: int
    pair_kind: str | None
    pairs_with: str | None
    pr: str


@dataclass(frozen=True)
class Story:
    """A probe's story, newest first; ``quiet`` words a probe without transitions, and ``earlier``
    counts the transitions left out by a limit."""

    parts: tuple[StoryPart, ...] = ()
    quiet: str = ""
    earlier: int = 0


@dataclass(frozen=True)
class Span:
    """Commits ``first``..``last`` of the line (indices, oldest first) that share one timeline row:
    a commit of its own, or a gap of commits not measured themselves, nothing happened at, and
    whose cells are all the same."""

    first: int
    last: int

    @property
    def gap(self) -> bool:
        return self.last > self.first


def own_rows(data: ReportData) -> frozenset[str]:
    """The commits with a timeline row of their own: every commit a run was measured at, every
    commit the other sections name (a transition or a commit that may hide one, either end of a
    revert or re-land pair, the ends of a stretch, a bisect's ends, answer and steps), and the
    line's first and last. Every commit, where ``data.measured`` is not known."""
    if data.measured is None:
        return frozenset(c.sha for c in data.commits)
    named = set(data.measured)
    for t in data.transitions:
        named.update((t.sha, *t.candidates, *([t.pairs_with] if t.pairs_with else [])))
    for s in data.stretches:
        named.update((s.first, s.last))
    for b in data.bisects:
        named.update((b.good, b.bad, *b.candidates, *(step.sha for step in b.steps)))
        if b.culprit:
            named.add(b.culprit)
    if data.commits:
        named.update((data.commits[0].sha, data.commits[-1].sha))
    return frozenset(named)


def spans(data: ReportData, probes: list[str], own: frozenset[str]) -> list[Span]:
    """The timeline's rows, oldest first: each commit of ``own`` alone, and the runs of other
    commits split where their cells change, so that a gap tells its commits' results once."""
    commits = data.commits

    def cells(i: int) -> tuple[Cell, ...]:
        return tuple(data.cell(commits[i].sha, p) for p in probes)

    found = []
    first = 0
    while first < len(commits):
        last = first
        if commits[first].sha not in own:
            shared = cells(first)
            while last + 1 < len(commits) and commits[last + 1].sha not in own and cells(last + 1) == shared:
                last += 1
        found.append(Span(first, last))
        first = last + 1
    return found


class ReportView:
    """Lookups over a ``ReportData`` that the sections share: commit order, transitions by probe,
    the marks of each cell, the revert and re-land pairs deduplicated over probes, and the
    timeline's rows with the anchor that links to each commit."""

    def __init__(self, data: ReportData) -> None:
        self.data = data
        self.index = {c.sha: i for i, c in enumerate(data.commits)}
        self.by_sha = {c.sha: c for c in data.commits}
        self.transitions = sorted(data.transitions, key=lambda t: (self.index.get(t.sha, len(data.commits)), t.probe))
        self.by_probe: dict[str, list[Any]] = defaultdict(list)
        for t in self.transitions:
            self.by_probe[t.probe].append(t)
        self.probes = list(data.probes) + sorted({t.probe for t in data.transitions} - set(data.probes))
        self.probe_order = {p: i for i, p in enumerate(self.probes)}.__getitem__
        self.marks = self._marks()
        self.pairs: dict[tuple[str, str, str], list[str]] = {}
        for t in self.transitions:
            if t.pairs_with and t.pair_kind:
                self.pairs.setdefault((t.sha, t.pair_kind, t.pairs_with), []).append(t.probe)
        self.rows = spans(data, self.probes, own_rows(data))
        self._gap_anchor = {
            data.commits[i].sha: f"g-{data.commits[row.first].sha}"
            for row in self.rows
            if row.gap
            for i in range(row.first, row.last + 1)
        }

    def anchor(self, sha: str) -> str:
        """The id of the timeline row that shows ``sha``: its own, or its gap's."""
        return self._gap_anchor.get(sha, f"c-{sha}")

    def _marks(self) -> dict[tuple[str, str], str]:
        """(sha, probe) -> "regression" or "fix" at the exact commit, "candidate" at a hidden one."""
        marks: dict[tuple[str, str], str] = {}
        for t in self.transitions:
            for sha in t.candidates:
                if sha != t.sha:
                    marks.setdefault((sha, t.probe), "candidate")
            marks[(t.sha, t.probe)] = t.kind
        return marks

    def pr(self, sha: str | None) -> str:
        commit = self.by_sha.get(sha or "")
        return f"#{commit.pr_number}" if commit and commit.pr_number is not None else ""

    def head_state(self, probe: str) -> tuple[str, Any]:
        """The newest measured state of ``probe`` and the commit it was measured at."""
        for commit in reversed(self.data.commits):
            state = cell_state(self.data.cell(commit.sha, probe))
            if state != "untested":
                return state, commit
        return "untested", None

    def quiet(self, probe: str) -> str:
        states = {cell_state(self.data.cell(c.sha, probe)) for c in self.data.commits} - {"untested"}
        if not states:
            return "no transition: untested"
        if states == {"fail"}:
            return "no transition: bad throughout"
        if "pass" in states:
            return "no transition: good throughout"
        return "no transition: untestable" if states == {"skip"} else "no transition: flaky"

    def story(self, probe: str, limit: int | None = None) -> Story:
        """Newest first, as ``regtrack scan`` tells it: "bad since R (reverts F, #n); fixed before
        by F; first broken by X"; with ``limit``, only the newest ``limit`` parts and a count."""
        found = self.by_probe.get(probe, [])
        if not found:
            return Story(quiet=self.quiet(probe))
        parts = []
        for position, t in enumerate(reversed(found)):
            if position == 0:
                lead = f"{'bad' if t.kind == 'regression' else 'good'} since"
            elif position == len(found) - 1 and t.kind == "regression":
                lead = "first broken by"
            else:
                lead = f"{'broken' if t.kind == 'regression' else 'fixed'} before by"
            among = len(t.candidates) if len(t.candidates) > 1 else 0
            pair_kind, pairs_with = (t.pair_kind, t.pairs_with) if t.pair_kind and t.pairs_with else (None, None)
            parts.append(StoryPart(lead, t.sha, among, pair_kind, pairs_with, self.pr(t.sha)))
        if limit is not None and len(parts) > limit:
            return Story(tuple(parts[:limit]), earlier=len(parts) - limit)
        return Story(tuple(parts))
