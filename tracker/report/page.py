"""What every section of the HTML report shares: escaping, isolation of text in ``<bdi>``, and
lookups over the report's data (see ``tracker.report.html`` for the page's safety rules)."""

from __future__ import annotations

import html
from collections import defaultdict
from datetime import datetime

from tracker.report.model import Cell, ReportCommit, ReportData, ReportTransition

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"

STATES = ("pass", "fail", "skip", "flaky", "untested")
STATE_LABEL = {"pass": "pass", "fail": "fail", "skip": "untestable", "flaky": "flaky", "untested": "untested"}
STATE_GLYPH = {"pass": "", "fail": "\u2715", "skip": "\u2205", "flaky": "\u2248", "untested": ""}
HEAD_LABEL = {"pass": "passing", "fail": "failing", "skip": "untestable", "flaky": "flaky", "untested": "untested"}
SHORT = 12



def e(value: object) -> str:
    return html.escape(str(value), quote=True)


def isolated(text: str) -> str:
    """Escaped text in its own bidi run: a right-to-left override in a subject or an author cannot
    reorder what the page shows around it."""
    return f"<bdi>{e(text)}</bdi>"


def isolated_plain(text: str) -> str:
    """``_isolated`` for a tooltip, which holds no markup: between FSI and PDI, unescaped."""
    return f"\u2068{text}\u2069"


def short(sha: str) -> str:
    return sha[:SHORT]


def cell_state(cell: Cell) -> str:
    return cell.state if cell.state in STATES else "untested"


def when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M")


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"



class PageBase:
    """Lookups shared by the sections; every method returns escaped HTML."""

    def __init__(self, data: ReportData) -> None:
        self.data = data
        self.index = {c.sha: i for i, c in enumerate(data.commits)}
        self.by_sha = {c.sha: c for c in data.commits}
        self.transitions = sorted(data.transitions, key=lambda t: (self.index.get(t.sha, len(data.commits)), t.probe))
        self.by_probe: dict[str, list[ReportTransition]] = defaultdict(list)
        for t in self.transitions:
            self.by_probe[t.probe].append(t)
        self.probes = list(data.probes) + sorted({t.probe for t in data.transitions} - set(data.probes))
        self.probe_order = {p: i for i, p in enumerate(self.probes)}.__getitem__
        # Cell marks: (sha, probe) -> "regression" | "fix" for the exact commit, "candidate" for a hidden one.
        self.marks: dict[tuple[str, str], str] = {}
        for t in self.transitions:
            for sha in t.candidates:
                if sha != t.sha:
                    self.marks.setdefault((sha, t.probe), "candidate")
            self.marks[(t.sha, t.probe)] = t.kind
        # Commit-level pairs, deduplicated over probes: (sha, kind, other sha).
        self.pairs: dict[tuple[str, str, str], list[str]] = {}
        for t in self.transitions:
            if t.pairs_with and t.pair_kind:
                self.pairs.setdefault((t.sha, t.pair_kind, t.pairs_with), []).append(t.probe)

    # ------------------------------------------------------------------ small pieces

    def link(self, sha: str | None) -> str:
        if not sha:
            return '<span class="muted">none</span>'
        commit = self.by_sha.get(sha)
        if commit is None:
            return f'<code class="sha" title="{e(sha)}">{e(short(sha))}</code>'
        return f'<a class="sha" href="#c-{e(sha)}" title="{e(sha)}: {e(commit.subject)}"><code>{e(short(sha))}</code></a>'

    def subject(self, sha: str | None) -> str:
        commit = self.by_sha.get(sha or "")
        return f'<span class="subject" title="{e(commit.subject)}">{isolated(commit.subject)}</span>' if commit else ""

    def pr(self, sha: str) -> str:
        commit = self.by_sha.get(sha)
        return f"#{e(commit.pr_number)}" if commit and commit.pr_number is not None else ""

    def head_state(self, probe: str) -> tuple[str, ReportCommit | None]:
        for commit in reversed(self.data.commits):
            state = cell_state(self.data.cell(commit.sha, probe))
            if state != "untested":
                return state, commit
        return "untested", None

    def story(self, probe: str, limit: int | None = None) -> str:
        """Newest first, as ``regtrack scan`` tells it: "bad since R (reverts F, #n); fixed before
        by F; first broken by X"; with ``limit``, only the newest ``limit`` parts and a count."""
        found = self.by_probe.get(probe, [])
        if not found:
            states = {cell_state(self.data.cell(c.sha, probe)) for c in self.data.commits} - {"untested"}
            if not states:
                return "no transition: untested"
            if states == {"fail"}:
                return "no transition: bad throughout"
            if "pass" in states:
                return "no transition: good throughout"
            return "no transition: untestable" if states == {"skip"} else "no transition: flaky"
        parts = []
        for position, t in enumerate(reversed(found)):
            pr = self.pr(t.sha)
            if t.pair_kind and t.pairs_with:
                paired = f" ({e(t.pair_kind)} {self.link(t.pairs_with)}{', ' + pr if pr else ''})"
            else:
                paired = f" ({pr})" if pr else ""
            where = self.link(t.sha)
            if len(t.candidates) > 1:
                where = f"one of {len(t.candidates)} commits up to {where}"
            if position == 0:
                parts.append(f"{'bad' if t.kind == 'regression' else 'good'} since {where}{paired}")
            elif position == len(found) - 1 and t.kind == "regression":
                parts.append(f"first broken by {where}{paired}")
            else:
                parts.append(f"{'broken' if t.kind == 'regression' else 'fixed'} before by {where}{paired}")
        if limit is not None and len(parts) > limit:
            hidden = len(parts) - limit
            parts = [*parts[:limit], f'<a href="#transitions">{plural(hidden, "earlier transition")}</a>']
        return "; ".join(parts)

    # ------------------------------------------------------------------ sections

