"""The HTML report: one self-contained page rendered from a ``ReportData``.

The page holds inline CSS and inline SVG only: no script, no font, no image by URL, nothing that
is fetched when it is viewed; its Content-Security-Policy forbids every network load, so even a
string that escaped escaping could not reach out. Every string that comes from a repository or
the database (subjects, authors, signatures, probe names, SHAs, hosts) goes through ``_e``, which
is ``html.escape(..., quote=True)``: a subject holding ``<script>`` renders as text. Subjects and
authors shown as text are also isolated in ``<bdi>``, so bidi control characters stay inside them.
"""

from __future__ import annotations

import html
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime

from tracker.report.model import Cell, ReportBisect, ReportCommit, ReportData, ReportTransition

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"

STATES = ("pass", "fail", "skip", "flaky", "untested")
STATE_LABEL = {"pass": "pass", "fail": "fail", "skip": "untestable", "flaky": "flaky", "untested": "untested"}
STATE_GLYPH = {"pass": "", "fail": "\u2715", "skip": "\u2205", "flaky": "\u2248", "untested": ""}
HEAD_LABEL = {"pass": "passing", "fail": "failing", "skip": "untestable", "flaky": "flaky", "untested": "untested"}
SHORT = 12


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _isolated(text: str) -> str:
    """Escaped text in its own bidi run: a right-to-left override in a subject or an author cannot
    reorder what the page shows around it."""
    return f"<bdi>{_e(text)}</bdi>"


def _isolated_plain(text: str) -> str:
    """``_isolated`` for a tooltip, which holds no markup: between FSI and PDI, unescaped."""
    return f"\u2068{text}\u2069"


def _short(sha: str) -> str:
    return sha[:SHORT]


def _state(cell: Cell) -> str:
    return cell.state if cell.state in STATES else "untested"


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M")


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


class _Page:
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
            return f'<code class="sha" title="{_e(sha)}">{_e(_short(sha))}</code>'
        return f'<a class="sha" href="#c-{_e(sha)}" title="{_e(sha)}: {_e(commit.subject)}"><code>{_e(_short(sha))}</code></a>'

    def subject(self, sha: str | None) -> str:
        commit = self.by_sha.get(sha or "")
        return f'<span class="subject" title="{_e(commit.subject)}">{_isolated(commit.subject)}</span>' if commit else ""

    def pr(self, sha: str) -> str:
        commit = self.by_sha.get(sha)
        return f"#{_e(commit.pr_number)}" if commit and commit.pr_number is not None else ""

    def head_state(self, probe: str) -> tuple[str, ReportCommit | None]:
        for commit in reversed(self.data.commits):
            state = _state(self.data.cell(commit.sha, probe))
            if state != "untested":
                return state, commit
        return "untested", None

    def story(self, probe: str, limit: int | None = None) -> str:
        """Newest first, as ``regtrack scan`` tells it: "bad since R (reverts F, #n); fixed before
        by F; first broken by X"; with ``limit``, only the newest ``limit`` parts and a count."""
        found = self.by_probe.get(probe, [])
        if not found:
            states = {_state(self.data.cell(c.sha, probe)) for c in self.data.commits} - {"untested"}
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
                paired = f" ({_e(t.pair_kind)} {self.link(t.pairs_with)}{', ' + pr if pr else ''})"
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
            parts = [*parts[:limit], f'<a href="#transitions">{_plural(hidden, "earlier transition")}</a>']
        return "; ".join(parts)

    # ------------------------------------------------------------------ sections

    def header(self) -> str:
        d = self.data
        stats = [
            _plural(len(d.commits), "commit"),
            _plural(len(self.probes), "probe"),
            _plural(len(d.transitions), "transition"),
            _plural(len({(s, o) for s, _, o in self.pairs}), "revert/re-land pair"),
            _plural(len(d.bisects), "bisect"),
        ]
        span = ""
        if d.commits:
            first, last = d.commits[0], d.commits[-1]
            span = f'<p class="span">{self.link(first.sha)} {_e(_when(first.authored_at))} &rarr; {self.link(last.sha)} {_e(_when(last.authored_at))} (first-parent line)</p>'
        return (
            '<header class="top">'
            f'<h1><span class="brand">regtrack</span> {_e(d.repository)}</h1>'
            f'<p class="meta">generated {_e(d.generated_at.strftime("%Y-%m-%d %H:%M %Z").strip())} &middot; {" &middot; ".join(stats)}</p>'
            f"{span}"
            '<nav><a href="#probes">probes</a><a href="#overview">overview</a><a href="#timeline">timeline</a>'
            '<a href="#transitions">transitions</a><a href="#stretches">stretches</a><a href="#bisects">bisects</a>'
            '<a href="#environments">environments</a></nav>'
            "</header>"
        )

    def probes_section(self) -> str:
        rows = []
        for probe in self.probes:
            state, at = self.head_state(probe)
            where = f" at {self.link(at.sha)}" if at is not None and at is not self.data.commits[-1] else ""
            count = len(self.by_probe.get(probe, []))
            rows.append(
                f'<tr><th scope="row" class="probe-name">{_e(probe)}</th>'
                f'<td><span class="pill s-{state}">{HEAD_LABEL[state]}</span>{where}</td>'
                f'<td class="num">{count}</td><td class="story">{self.story(probe, limit=4)}</td></tr>'
            )
        body = "".join(rows) or '<tr><td colspan="4" class="muted">no probes</td></tr>'
        return (
            '<section id="probes"><h2>Probes</h2>'
            '<table class="list"><thead><tr><th>probe</th><th>at head</th><th>transitions</th><th>story, newest first</th></tr></thead>'
            f"<tbody>{body}</tbody></table></section>"
        )

    def legend(self) -> str:
        items = "".join(f'<span class="key"><span class="sw s-{s}">{STATE_GLYPH[s]}</span>{STATE_LABEL[s]}</span>' for s in STATES)
        return (
            f'<div class="legend">{items}'
            '<span class="key"><span class="sw s-fail t-regression">\u2715</span>regression (first bad commit)</span>'
            '<span class="key"><span class="sw s-pass t-fix"></span>fix (first good commit)</span>'
            '<span class="key"><span class="sw s-skip t-candidate">\u2205</span>may hide the transition</span>'
            '<span class="key"><span class="ev revert">\u21a9 reverts</span><span class="ev reland">\u21bb re-lands</span></span>'
            "</div>"
        )

    def overview(self) -> str:
        commits = self.data.commits
        n = len(commits)
        if not n:
            return '<section id="overview"><h2>Overview</h2><p class="muted">No commits.</p></section>'
        rows = []
        for probe in self.probes:
            rects = []
            start = 0
            states = [_state(self.data.cell(c.sha, probe)) for c in commits]
            for i in range(1, n + 1):
                if i == n or states[i] != states[start]:
                    first, last = commits[start], commits[i - 1]
                    label = f"{probe}: {STATE_LABEL[states[start]]}, {_short(first.sha)}..{_short(last.sha)} ({_plural(i - start, 'commit')})"
                    y, h = ("0.4", "0.2") if states[start] == "untested" else ("0", "1")
                    rects.append(
                        f'<a href="#c-{_e(first.sha)}"><rect x="{start}" y="{y}" width="{i - start}" height="{h}" class="f-{states[start]}">'
                        f"<title>{_e(label)}</title></rect></a>"
                    )
                    start = i
            ticks = "".join(
                f'<line x1="{self.index[t.sha] + 0.5}" x2="{self.index[t.sha] + 0.5}" y1="0" y2="1" class="tick"/>'
                for t in self.by_probe.get(probe, [])
                if t.sha in self.index
            )
            rows.append(
                f'<div class="ov-label" title="{_e(probe)}">{_e(probe)}</div>'
                f'<svg class="strip" viewBox="0 0 {n} 1" preserveAspectRatio="none" role="img" aria-label="{_e(probe)} over {n} commits">'
                f"{''.join(rects)}{ticks}</svg>"
            )
        arcs, labels = [], []
        for (sha, kind, other), probes in self.pairs.items():
            if sha not in self.index or other not in self.index:
                continue
            x1, x2 = self.index[other] + 0.5, self.index[sha] + 0.5
            css, arrow = ("revert", "\u21a9") if kind == "reverts" else ("reland", "\u21bb")
            commit = self.by_sha[sha]
            label = f"{_short(sha)} {kind} {_short(other)}: {_isolated_plain(commit.subject)} ({', '.join(probes)})"
            arcs.append(f'<path d="M{x1} 12 C{x1} 2 {x2} 2 {x2} 12" class="arc {css}"><title>{_e(label)}</title></path>')
            name = f"#{commit.pr_number}" if commit.pr_number is not None else sha[:8]
            labels.append((100 * (x1 + x2) / 2 / n, f'class="arc-label {css}" href="#c-{_e(sha)}" title="{_e(label)}">{arrow} {_e(name)}</a>'))
        # Labels sit under the arcs' middles, on as many lines as keep neighbours from overlapping.
        placed: list[str] = []
        ends: list[float] = []  # per line, where its last label sits
        for left, rest in sorted(labels, key=lambda item: item[0]):
            line = next((i for i, end in enumerate(ends) if left - end >= 7), len(ends))
            ends[line:line + 1] = [left]
            placed.append(f'<a style="left:{left:.3f}%;top:{26 + 18 * line}px" {rest}')
        if arcs:
            rows.append(
                f'<div class="ov-label">reverts / re-lands</div><div class="arcs-wrap" style="height:{28 + 18 * len(ends)}px">'
                f'<svg class="arcs" viewBox="0 0 {n} 12" preserveAspectRatio="none" role="img" aria-label="revert and re-land pairs">{"".join(arcs)}</svg>'
                f'{"".join(placed)}</div>'
            )
        first, last = commits[0], commits[-1]
        axis = (
            '<div class="ov-label"></div><div class="axis">'
            f"<span>&larr; oldest {self.link(first.sha)} {_e(_when(first.authored_at))}</span>"
            f"<span>newest {self.link(last.sha)} {_e(_when(last.authored_at))} &rarr;</span></div>"
        )
        return (
            '<section id="overview"><h2>Overview</h2>'
            f'<p class="hint">Each probe along the first-parent line, oldest on the left; arcs join a revert or re-land to the commit it repeats or undoes. Click a band to jump to it in the timeline.</p>'
            f'<div class="ov">{"".join(rows)}{axis}</div></section>'
        )

    def events(self, sha: str) -> str:
        """The badges of one timeline row: transitions at it, and the pairs it is part of."""
        out = []
        here = [t for t in self.transitions if t.sha == sha]
        for kind, arrow, verb in (("regression", "\u25bc", "breaks"), ("fix", "\u25b2", "fixes")):
            probes = [t.probe for t in here if t.kind == kind]
            if probes:
                what = _e(probes[0]) if len(probes) == 1 else f"{len(probes)} probes"
                widest = max(len(t.candidates) for t in here if t.kind == kind)
                hidden = f" (one of {widest})" if widest > 1 else ""
                tip = f"{kind} of {', '.join(probes)}" + (f"; hidden: this or one of the {widest - 1} commits before it" if widest > 1 else "")
                out.append(f'<span class="ev {kind}" title="{_e(tip)}">{arrow} {verb} {what}{hidden}</span>')
        for (mine, kind, other), probes in self.pairs.items():
            if mine == sha:
                css, word = ("revert", "\u21a9 reverts") if kind == "reverts" else ("reland", "\u21bb re-lands")
                out.append(f'<a class="ev {css}" href="#c-{_e(other)}" title="{word} {_e(other)}">{word} <code>{_e(other[:8])}</code></a>')
            elif other == sha:
                css, word = ("revert", "reverted by") if kind == "reverts" else ("reland", "re-landed by")
                out.append(f'<a class="ev {css} back" href="#c-{_e(mine)}" title="{word} {_e(mine)}">{word} <code>{_e(mine[:8])}</code></a>')
        return "".join(out)

    def timeline(self) -> str:
        heads = "".join(f'<th class="probe" scope="col" title="{_e(p)}"><span>{_e(p)}</span></th>' for p in self.probes)
        rows = []
        kinds_at: dict[str, set[str]] = defaultdict(set)
        for t in self.transitions:
            kinds_at[t.sha].add(t.kind)
        for commit in reversed(self.data.commits):
            sha = commit.sha
            cells = []
            for probe in self.probes:
                cell = self.data.cell(sha, probe)
                state = _state(cell)
                mark = self.marks.get((sha, probe))
                tip = f"{probe} at {_short(sha)}: {STATE_LABEL[state]}"
                if cell.runs:
                    tip += f" ({_plural(cell.runs, 'run')})"
                if mark == "candidate":
                    tip += "\nmay be the transition (hidden by untestable or flaky commits)"
                elif mark:
                    tip += f"\n{mark}: first {'bad' if mark == 'regression' else 'good'} commit"
                if cell.signature:
                    tip += f"\n{cell.signature}"
                css = f"c s-{state}" + (f" t-{mark}" if mark else "")
                cells.append(f'<td class="{css}" title="{_e(tip)}">{STATE_GLYPH[state]}</td>')
            kinds = kinds_at.get(sha, set())
            row_css = " ".join(sorted(f"k-{k}" for k in kinds))
            row_attr = f' class="{row_css}"' if row_css else ""
            pr = f"#{_e(commit.pr_number)}" if commit.pr_number is not None else ""
            rows.append(
                f'<tr id="c-{_e(sha)}"{row_attr}>'
                f'<td class="sha"><a href="#c-{_e(sha)}" title="{_e(sha)}"><code>{_e(_short(sha))}</code></a></td>'
                f"{''.join(cells)}"
                f'<td class="subj" title="{_e(commit.subject)}">{_isolated(commit.subject)}</td>'
                f'<td class="events">{self.events(sha)}</td>'
                f'<td class="pr">{pr}</td>'
                f'<td class="author">{_isolated(commit.author)}</td>'
                f'<td class="date">{_e(_when(commit.authored_at))}</td></tr>'
            )
        body = "".join(rows)
        return (
            '<section id="timeline"><h2>Timeline</h2>'
            f'<p class="hint">{_plural(len(self.data.commits), "commit")} of the first-parent line, newest first; hover a cell for its runs and failure signature.</p>'
            f"{self.legend()}"
            '<div class="grid-wrap"><table class="grid">'
            f'<thead><tr><th class="sha" scope="col">commit</th>{heads}<th scope="col">subject</th><th scope="col">events</th>'
            '<th scope="col">PR</th><th scope="col">author</th><th scope="col">date</th></tr></thead>'
            f"<tbody>{body}</tbody></table></div></section>"
        )

    def pairs_table(self) -> str:
        if not self.pairs:
            return ""
        rows = []
        for (sha, kind, other), probes in sorted(self.pairs.items(), key=lambda kv: self.index.get(kv[0][0], -1), reverse=True):
            css, arrow = ("revert", "\u21a9") if kind == "reverts" else ("reland", "\u21bb")
            rows.append(
                f"<tr><td>{self.link(sha)}</td><td>{self.subject(sha)}</td><td>{self.pr(sha)}</td>"
                f'<td><span class="ev {css}">{arrow} {_e(kind)}</span></td>'
                f"<td>{self.link(other)}</td><td>{self.subject(other)}</td><td>{self.pr(other)}</td>"
                f'<td class="probes">{_e(", ".join(sorted(probes, key=self.probe_order)))}</td></tr>'
            )
        return (
            "<h3>Revert and re-land pairs</h3>"
            '<table class="list wide"><thead><tr><th>commit</th><th>subject</th><th>PR</th><th></th><th>commit</th><th>subject</th><th>PR</th><th>probes</th></tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>"
        )

    def transitions_section(self) -> str:
        if not self.transitions:
            return '<section id="transitions"><h2>Transitions</h2><p class="muted">No transitions.</p></section>'
        same: dict[tuple[object, ...], list[str]] = {}
        for probe in self.probes:
            found = self.by_probe.get(probe)
            if found:
                same.setdefault(tuple((t.sha, t.kind, t.pairs_with, t.pair_kind, t.candidates) for t in found), []).append(probe)
        groups = []
        for probes in same.values():
            probe, found = probes[0], self.by_probe[probes[0]]
            with_pairs = any(t.pair_kind and t.pairs_with for t in found)
            with_hidden = any(len(t.candidates) > 1 for t in found)
            rows = []
            for t in reversed(found):
                commit = self.by_sha.get(t.sha)
                pair = ""
                if t.pair_kind and t.pairs_with:
                    css = "revert" if t.pair_kind == "reverts" else "reland"
                    pair = f'<span class="ev {css}">{_e(t.pair_kind)}</span> {self.link(t.pairs_with)} {self.subject(t.pairs_with)}'
                hidden = ""
                if len(t.candidates) > 1:
                    hidden = f"one of {len(t.candidates)}: " + " ".join(self.link(c) for c in t.candidates)
                pill, arrow = ("s-fail", "\u25bc") if t.kind == "regression" else ("s-pass", "\u25b2")
                rows.append(
                    f'<tr class="k-{_e(t.kind)}"><td>{self.link(t.sha)}</td>'
                    f'<td><span class="pill {pill}">{arrow} {_e(t.kind)}</span></td>'
                    f'<td>{self.subject(t.sha)}</td><td class="nowrap">{self.pr(t.sha)}</td>'
                    f'<td class="author">{_isolated(commit.author) if commit else ""}</td><td class="date">{_e(_when(commit.authored_at)) if commit else ""}</td>'
                    f"{f'<td>{pair}</td>' if with_pairs else ''}{f'<td>{hidden}</td>' if with_hidden else ''}</tr>"
                )
            groups.append(
                f'<h3 class="probe-name">{" &middot; ".join(_e(p) for p in probes)}</h3><p class="story">{self.story(probe)}</p>'
                '<table class="list wide"><thead><tr><th>commit</th><th>kind</th><th>subject</th><th>PR</th><th>author</th><th>date</th>'
                f"{'<th>pairs with</th>' if with_pairs else ''}{'<th>hidden among</th>' if with_hidden else ''}</tr></thead>"
                f"<tbody>{''.join(rows)}</tbody></table>"
            )
        return f'<section id="transitions"><h2>Transitions</h2>{self.pairs_table()}{"".join(groups)}</section>'

    def stretches_section(self) -> str:
        if not self.data.stretches:
            return '<section id="stretches"><h2>Untestable and flaky stretches</h2><p class="muted">None.</p></section>'
        merged: dict[tuple[str, str, str], list[str]] = {}
        for s in sorted(self.data.stretches, key=lambda s: (self.index.get(s.first, -1), s.kind, s.last)):
            merged.setdefault((s.kind, s.first, s.last), []).append(s.probe)
        rows = []
        for (kind, first, last), probes in merged.items():
            a, b = self.index.get(first), self.index.get(last)
            length = _plural(b - a + 1, "commit") if a is not None and b is not None else ""
            state = "skip" if kind == "untestable" else "flaky"
            order = [p for p in self.probes if p in probes] + [p for p in probes if p not in self.probes]
            who = f"all {len(order)} probes" if len(order) > 1 and set(order) == set(self.probes) else ", ".join(order)
            rows.append(
                f'<tr><td class="probe-name" title="{_e(", ".join(order))}">{_e(who)}</td><td><span class="pill s-{state}">{_e(kind)}</span></td>'
                f"<td>{self.link(first)} {self.subject(first)}</td><td>{self.link(last)} {self.subject(last)}</td>"
                f'<td class="num nowrap">{length}</td></tr>'
            )
        return (
            '<section id="stretches"><h2>Untestable and flaky stretches</h2>'
            '<p class="hint">Never reported as transitions: a change of state across one is a transition hidden among its commits.</p>'
            '<table class="list"><thead><tr><th>probe</th><th>kind</th><th>first</th><th>last</th><th>length</th></tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></section>"
        )

    def bisect(self, b: ReportBisect) -> str:
        steps = []
        for number, step in enumerate(b.steps, 1):
            verdict = {"good": "pass", "bad": "fail"}.get(step.verdict, "skip")
            steps.append(
                f'<tr><td class="num">{number}</td><td>{self.link(step.sha)}</td><td>{self.subject(step.sha)}</td>'
                f'<td><span class="pill s-{verdict}">{_e(step.verdict)}</span></td>'
                f'<td>{"stored result" if step.reused else "ran"}</td></tr>'
            )
        result = f"culprit {self.link(b.culprit)} {self.subject(b.culprit)}" if b.culprit else ""
        if not b.culprit and b.candidates:
            result = f"one of {len(b.candidates)}: " + " ".join(self.link(c) for c in b.candidates)
        if b.confidence is not None and b.confidence < 1.0:
            result = f"{result or 'no culprit'} (probability {b.confidence:.3f})"
        ran = sum(1 for s in b.steps if not s.reused)
        strategy = f" &middot; {_e(b.strategy)}" if b.strategy else ""
        return (
            f'<details open class="bisect"><summary><b>#{_e(b.session_id)}</b> <span class="probe-name">{_e(b.probe)}</span>: '
            f"good {self.link(b.good)} &rarr; bad {self.link(b.bad)} &middot; {_e(b.status)}{strategy} &middot; {result or 'no culprit'}"
            f' <span class="muted">({_plural(len(b.steps), "step")}, {ran} ran)</span></summary>'
            '<table class="list"><thead><tr><th>step</th><th>commit</th><th>subject</th><th>verdict</th><th>result</th></tr></thead>'
            f"<tbody>{''.join(steps) or '<tr><td colspan=5 class=muted>no steps</td></tr>'}</tbody></table></details>"
        )

    def bisects_section(self) -> str:
        body = "".join(self.bisect(b) for b in sorted(self.data.bisects, key=lambda b: b.session_id, reverse=True))
        return f'<section id="bisects"><h2>Bisects</h2>{body or "<p class=muted>No bisects.</p>"}</section>'

    def environments_section(self) -> str:
        fields = ("device", "gpu_name", "compute_capability", "driver", "cuda", "torch", "flashinfer", "python", "host")
        heads = "".join(f"<th>{f.replace('_', ' ')}</th>" for f in ("fingerprint", *fields))
        rows = []
        for env in self.data.environments:
            values = "".join(f"<td>{_e(v) if (v := getattr(env, f)) is not None else '<span class=muted>&ndash;</span>'}</td>" for f in fields)
            rows.append(f'<tr><td><code title="{_e(env.fingerprint)}">{_e(env.fingerprint[:16])}</code></td>{values}</tr>')
        body = "".join(rows) or f'<tr><td colspan="{len(fields) + 1}" class="muted">no environments</td></tr>'
        return f'<section id="environments"><h2>Environments</h2><table class="list"><thead><tr>{heads}</tr></thead><tbody>{body}</tbody></table></section>'


STYLE = """
:root{--ink:#1f2328;--muted:#656d76;--line:#d0d7de;--bg:#fff;--panel:#f6f8fa;--pass:#2da44e;--fail:#cf222e;
--skip:#8c959f;--flaky:#e16f24;--untested:#eaeef2;--revert:#8250df;--reland:#0969da;--hl:#fff8c5}
*{box-sizing:border-box}
body{margin:0;padding:0 24px 48px;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans","DejaVu Sans",sans-serif;color:var(--ink);background:var(--bg)}
code,.sha,.date,.pr,.num{font-family:ui-monospace,"SFMono-Regular","DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:12px}
a{color:var(--reland);text-decoration:none}a:hover{text-decoration:underline}
h1{font-size:22px;margin:0}h2{font-size:18px;margin:32px 0 8px;padding-bottom:4px;border-bottom:1px solid var(--line)}
h3{font-size:15px;margin:20px 0 4px}.brand{color:var(--muted);font-weight:400}
header.top{padding:18px 0 10px;border-bottom:1px solid var(--line)}
.meta,.span,.hint{margin:4px 0;color:var(--muted)}
nav{margin-top:8px;display:flex;gap:14px;flex-wrap:wrap}
.muted{color:var(--muted)}
.probe-name{font-family:ui-monospace,"SFMono-Regular","DejaVu Sans Mono",monospace;font-size:13px;font-weight:600}
table.list{border-collapse:collapse;margin:6px 0 10px}
table.list th,table.list td{border-bottom:1px solid var(--line);padding:4px 10px 4px 0;text-align:left;vertical-align:top}
table.list th{font-weight:600;color:var(--muted);font-size:12px;white-space:nowrap}
table.list td.date,table.list td.nowrap,table.list td.author{white-space:nowrap}
table.list.wide{width:100%}
td.num{text-align:right}
.story{max-width:110ch}
.pill{display:inline-block;padding:0 8px;border-radius:10px;font-size:12px;font-weight:600;color:#fff;white-space:nowrap}
.pill.s-untested{color:var(--ink)}
.s-pass{background:var(--pass)}.s-fail{background:var(--fail)}.s-skip{background:var(--skip)}
.s-flaky{background:var(--flaky)}.s-untested{background:var(--untested)}
.f-pass{fill:var(--pass)}.f-fail{fill:var(--fail)}.f-skip{fill:var(--skip)}.f-flaky{fill:var(--flaky)}.f-untested{fill:var(--untested)}
.legend{display:flex;flex-wrap:wrap;gap:6px 16px;align-items:center;margin:6px 0 10px;font-size:12px}
.key{display:inline-flex;gap:6px;align-items:center}
.sw{display:inline-block;width:18px;height:16px;color:#fff;font-size:11px;line-height:16px;text-align:center}
.ov{display:grid;grid-template-columns:max-content 1fr;gap:4px 12px;align-items:center;margin-top:8px}
.ov-label{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:12px;text-align:right;white-space:nowrap}
svg.strip{width:100%;height:22px;display:block;border-radius:3px}
.arcs-wrap{position:relative}
svg.arcs{width:100%;height:26px;display:block;position:absolute;top:0}
.arc-label{position:absolute;transform:translateX(-50%);font-size:11px;font-weight:600;line-height:16px;padding:0 5px;border-radius:3px;color:#fff;white-space:nowrap}
.arc-label.revert{background:var(--revert)}.arc-label.reland{background:var(--reland)}
svg .tick{stroke:var(--ink);stroke-width:2;vector-effect:non-scaling-stroke;opacity:.55}
svg .arc{fill:none;stroke-width:2;vector-effect:non-scaling-stroke}
svg .arc.revert{stroke:var(--revert)}svg .arc.reland{stroke:var(--reland);stroke-dasharray:5 3}
.axis{display:flex;justify-content:space-between;color:var(--muted);font-size:12px}
.grid-wrap{max-height:78vh;overflow:auto;border:1px solid var(--line);border-radius:6px}
table.grid{border-collapse:separate;border-spacing:0;font-size:12px;width:max-content;min-width:100%}
table.grid thead th{position:sticky;top:0;z-index:2;background:var(--panel);border-bottom:1px solid var(--line);
text-align:left;vertical-align:bottom;padding:4px 8px;font-weight:600;color:var(--muted)}
table.grid th.probe{padding:6px 0;width:20px;text-align:center}
table.grid th.probe span{writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap;font-family:ui-monospace,"DejaVu Sans Mono",monospace;color:var(--ink)}
table.grid td{padding:0 8px;height:18px;white-space:nowrap;border-bottom:1px solid #f0f2f4}
table.grid td.c{padding:0;width:20px;min-width:20px;text-align:center;color:#fff;font-size:11px;border-left:2px solid var(--bg);border-right:2px solid var(--bg);border-bottom:0}
table.grid td.sha{position:sticky;left:0;z-index:1;background:var(--bg);border-left:4px solid transparent}
table.grid thead th.sha{z-index:3;background:var(--panel)}
table.grid tr.k-regression td.sha{border-left-color:var(--fail)}table.grid tr.k-fix td.sha{border-left-color:var(--pass)}
table.grid tr.k-fix.k-regression td.sha{border-left-color:var(--flaky)}
table.grid tr.k-regression td,table.grid tr.k-fix td{border-bottom-color:var(--line)}
td.t-regression,td.t-fix,.sw.t-regression,.sw.t-fix{box-shadow:inset 0 0 0 2px var(--ink);font-weight:700}
td.t-fix::after,.sw.t-fix::after{content:"\\25b2";color:#fff}
td.t-candidate,.sw.t-candidate{outline:2px dashed var(--ink);outline-offset:-2px}
td.subj{max-width:56ch;overflow:hidden;text-overflow:ellipsis}
td.author{color:var(--muted);max-width:18ch;overflow:hidden;text-overflow:ellipsis}td.date,td.pr{color:var(--muted)}
td.events{padding:0 4px}
.ev{display:inline-block;margin-right:4px;padding:0 6px;border-radius:3px;font-size:11px;line-height:16px;font-weight:600;white-space:nowrap;border:1px solid}
.ev.regression{color:var(--fail);border-color:var(--fail)}.ev.fix{color:var(--pass);border-color:var(--pass)}
.ev.revert{color:#fff;background:var(--revert);border-color:var(--revert)}.ev.reland{color:#fff;background:var(--reland);border-color:var(--reland)}
.ev.back{background:none}.ev.revert.back{color:var(--revert)}.ev.reland.back{color:var(--reland)}
.ev code{font-size:11px}
table.grid tr{scroll-margin-top:11rem}
table.grid tr:target td:not(.c){background:var(--hl)}
table.grid tbody tr:hover td:not(.c){background:var(--panel)}
details.bisect{border:1px solid var(--line);border-radius:6px;padding:6px 12px;margin:8px 0}
details.bisect summary{cursor:pointer}
footer{margin-top:40px;color:var(--muted);font-size:12px}
"""


def render_html(data: ReportData) -> str:
    page = _Page(data)
    parts: Iterable[str] = (
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_e(CSP)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="referrer" content="no-referrer">',
        '<link rel="icon" href="data:,">',
        f"<title>regtrack report: {_e(data.repository)}</title>",
        f"<style>{STYLE}</style></head><body>",
        page.header(),
        page.probes_section(),
        page.overview(),
        page.timeline(),
        page.transitions_section(),
        page.stretches_section(),
        page.bisects_section(),
        page.environments_section(),
        f"<footer>regtrack report &middot; one self-contained page: nothing is fetched when it is viewed &middot; generated {_e(data.generated_at.isoformat())}</footer>",
        "</body></html>",
    )
    return "\n".join(parts) + "\n"


__all__ = ["CSP", "render_html"]
