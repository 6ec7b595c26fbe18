"""The report's top half: the header, the probes, the overview and the timeline of each probe along the first-parent line."""

from __future__ import annotations

from collections import defaultdict

from tracker.report.page import (
    HEAD_LABEL,
    STATE_GLYPH,
    STATE_LABEL,
    STATES,
    PageBase,
    cell_state,
    e,
    isolated,
    isolated_plain,
    plural,
    short,
    when,
)


class TimelineSections(PageBase):
    def header(self) -> str:
        d = self.data
        stats = [
            plural(len(d.commits), "commit"),
            plural(len(self.probes), "probe"),
            plural(len(d.transitions), "transition"),
            plural(len({(s, o) for s, _, o in self.pairs}), "revert/re-land pair"),
            plural(len(d.bisects), "bisect"),
        ]
        span = ""
        if d.commits:
            first, last = d.commits[0], d.commits[-1]
            span = f'<p class="span">{self.link(first.sha)} {e(when(first.authored_at))} &rarr; {self.link(last.sha)} {e(when(last.authored_at))} (first-parent line)</p>'
        return (
            '<header class="top">'
            f'<h1><span class="brand">regtrack</span> {e(d.repository)}</h1>'
            f'<p class="meta">generated {e(d.generated_at.strftime("%Y-%m-%d %H:%M %Z").strip())} &middot; {" &middot; ".join(stats)}</p>'
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
                f'<tr><th scope="row" class="probe-name">{e(probe)}</th>'
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
            states = [cell_state(self.data.cell(c.sha, probe)) for c in commits]
            for i in range(1, n + 1):
                if i == n or states[i] != states[start]:
                    first, last = commits[start], commits[i - 1]
                    label = f"{probe}: {STATE_LABEL[states[start]]}, {short(first.sha)}..{short(last.sha)} ({plural(i - start, 'commit')})"
                    y, h = ("0.4", "0.2") if states[start] == "untested" else ("0", "1")
                    rects.append(
                        f'<a href="#c-{e(first.sha)}"><rect x="{start}" y="{y}" width="{i - start}" height="{h}" class="f-{states[start]}">'
                        f"<title>{e(label)}</title></rect></a>"
                    )
                    start = i
            ticks = "".join(
                f'<line x1="{self.index[t.sha] + 0.5}" x2="{self.index[t.sha] + 0.5}" y1="0" y2="1" class="tick"/>'
                for t in self.by_probe.get(probe, [])
                if t.sha in self.index
            )
            rows.append(
                f'<div class="ov-label" title="{e(probe)}">{e(probe)}</div>'
                f'<svg class="strip" viewBox="0 0 {n} 1" preserveAspectRatio="none" role="img" aria-label="{e(probe)} over {n} commits">'
                f"{''.join(rects)}{ticks}</svg>"
            )
        arcs, labels = [], []
        for (sha, kind, other), probes in self.pairs.items():
            if sha not in self.index or other not in self.index:
                continue
            x1, x2 = self.index[other] + 0.5, self.index[sha] + 0.5
            css, arrow = ("revert", "\u21a9") if kind == "reverts" else ("reland", "\u21bb")
            commit = self.by_sha[sha]
            label = f"{short(sha)} {kind} {short(other)}: {isolated_plain(commit.subject)} ({', '.join(probes)})"
            arcs.append(f'<path d="M{x1} 12 C{x1} 2 {x2} 2 {x2} 12" class="arc {css}"><title>{e(label)}</title></path>')
            name = f"#{commit.pr_number}" if commit.pr_number is not None else sha[:8]
            labels.append((100 * (x1 + x2) / 2 / n, f'class="arc-label {css}" href="#c-{e(sha)}" title="{e(label)}">{arrow} {e(name)}</a>'))
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
            f"<span>&larr; oldest {self.link(first.sha)} {e(when(first.authored_at))}</span>"
            f"<span>newest {self.link(last.sha)} {e(when(last.authored_at))} &rarr;</span></div>"
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
                what = e(probes[0]) if len(probes) == 1 else f"{len(probes)} probes"
                widest = max(len(t.candidates) for t in here if t.kind == kind)
                hidden = f" (one of {widest})" if widest > 1 else ""
                tip = f"{kind} of {', '.join(probes)}" + (f"; hidden: this or one of the {widest - 1} commits before it" if widest > 1 else "")
                out.append(f'<span class="ev {kind}" title="{e(tip)}">{arrow} {verb} {what}{hidden}</span>')
        for (mine, kind, other), probes in self.pairs.items():
            if mine == sha:
                css, word = ("revert", "\u21a9 reverts") if kind == "reverts" else ("reland", "\u21bb re-lands")
                out.append(f'<a class="ev {css}" href="#c-{e(other)}" title="{word} {e(other)}">{word} <code>{e(other[:8])}</code></a>')
            elif other == sha:
                css, word = ("revert", "reverted by") if kind == "reverts" else ("reland", "re-landed by")
                out.append(f'<a class="ev {css} back" href="#c-{e(mine)}" title="{word} {e(mine)}">{word} <code>{e(mine[:8])}</code></a>')
        return "".join(out)

    def timeline(self) -> str:
        heads = "".join(f'<th class="probe" scope="col" title="{e(p)}"><span>{e(p)}</span></th>' for p in self.probes)
        rows = []
        kinds_at: dict[str, set[str]] = defaultdict(set)
        for t in self.transitions:
            kinds_at[t.sha].add(t.kind)
        for commit in reversed(self.data.commits):
            sha = commit.sha
            cells = []
            for probe in self.probes:
                cell = self.data.cell(sha, probe)
                state = cell_state(cell)
                mark = self.marks.get((sha, probe))
                tip = f"{probe} at {short(sha)}: {STATE_LABEL[state]}"
                if cell.runs:
                    tip += f" ({plural(cell.runs, 'run')})"
                if mark == "candidate":
                    tip += "\nmay be the transition (hidden by untestable or flaky commits)"
                elif mark:
                    tip += f"\n{mark}: first {'bad' if mark == 'regression' else 'good'} commit"
                if cell.signature:
                    tip += f"\n{cell.signature}"
                css = f"c s-{state}" + (f" t-{mark}" if mark else "")
                cells.append(f'<td class="{css}" title="{e(tip)}">{STATE_GLYPH[state]}</td>')
            kinds = kinds_at.get(sha, set())
            row_css = " ".join(sorted(f"k-{k}" for k in kinds))
            row_attr = f' class="{row_css}"' if row_css else ""
            pr = f"#{e(commit.pr_number)}" if commit.pr_number is not None else ""
            rows.append(
                f'<tr id="c-{e(sha)}"{row_attr}>'
                f'<td class="sha"><a href="#c-{e(sha)}" title="{e(sha)}"><code>{e(short(sha))}</code></a></td>'
                f"{''.join(cells)}"
                f'<td class="subj" title="{e(commit.subject)}">{isolated(commit.subject)}</td>'
                f'<td class="events">{self.events(sha)}</td>'
                f'<td class="pr">{pr}</td>'
                f'<td class="author">{isolated(commit.author)}</td>'
                f'<td class="date">{e(when(commit.authored_at))}</td></tr>'
            )
        body = "".join(rows)
        return (
            '<section id="timeline"><h2>Timeline</h2>'
            f'<p class="hint">{plural(len(self.data.commits), "commit")} of the first-parent line, newest first; hover a cell for its runs and failure signature.</p>'
            f"{self.legend()}"
            '<div class="grid-wrap"><table class="grid">'
            f'<thead><tr><th class="sha" scope="col">commit</th>{heads}<th scope="col">subject</th><th scope="col">events</th>'
            '<th scope="col">PR</th><th scope="col">author</th><th scope="col">date</th></tr></thead>'
            f"<tbody>{body}</tbody></table></div></section>"
        )

