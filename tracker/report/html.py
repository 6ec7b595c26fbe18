"""The HTML report: one self-contained page rendered from a ``ReportData``.

The page holds inline CSS and inline SVG only: no script, no font, no image by URL, nothing that
is fetched when it is viewed; its Content-Security-Policy forbids every network load, so even a
string that escaped escaping could not reach out. Every string that comes from a repository or
the database (subjects, authors, signatures, probe names, SHAs, hosts) goes through ``_e``, which
is ``html.escape(..., quote=True)``: a subject holding ``<script>`` renders as text. Subjects and
authors shown as text are also isolated in ``<bdi>``, so bidi control characters stay inside them.
"""

from __future__ import annotations

from collections.abc import Iterable

from tracker.report.model import ReportBisect, ReportData
from tracker.report.page import CSP, e, isolated, plural, when
from tracker.report.style import STYLE
from tracker.report.timeline import TimelineSections


class _Page(TimelineSections):
    """The report's lists: transitions with their pairs, stretches, bisects, environments."""

    def pairs_table(self) -> str:
        if not self.pairs:
            return ""
        rows = []
        for (sha, kind, other), probes in sorted(self.pairs.items(), key=lambda kv: self.index.get(kv[0][0], -1), reverse=True):
            css, arrow = ("revert", "\u21a9") if kind == "reverts" else ("reland", "\u21bb")
            rows.append(
                f"<tr><td>{self.link(sha)}</td><td>{self.subject(sha)}</td><td>{self.pr(sha)}</td>"
                f'<td><span class="ev {css}">{arrow} {e(kind)}</span></td>'
                f"<td>{self.link(other)}</td><td>{self.subject(other)}</td><td>{self.pr(other)}</td>"
                f'<td class="probes">{e(", ".join(sorted(probes, key=self.probe_order)))}</td></tr>'
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
                    pair = f'<span class="ev {css}">{e(t.pair_kind)}</span> {self.link(t.pairs_with)} {self.subject(t.pairs_with)}'
                hidden = ""
                if len(t.candidates) > 1:
                    hidden = f"one of {len(t.candidates)}: " + " ".join(self.link(c) for c in t.candidates)
                pill, arrow = ("s-fail", "\u25bc") if t.kind == "regression" else ("s-pass", "\u25b2")
                rows.append(
                    f'<tr class="k-{e(t.kind)}"><td>{self.link(t.sha)}</td>'
                    f'<td><span class="pill {pill}">{arrow} {e(t.kind)}</span></td>'
                    f'<td>{self.subject(t.sha)}</td><td class="nowrap">{self.pr(t.sha)}</td>'
                    f'<td class="author">{isolated(commit.author) if commit else ""}</td><td class="date">{e(when(commit.authored_at)) if commit else ""}</td>'
                    f"{f'<td>{pair}</td>' if with_pairs else ''}{f'<td>{hidden}</td>' if with_hidden else ''}</tr>"
                )
            groups.append(
                f'<h3 class="probe-name">{" &middot; ".join(e(p) for p in probes)}</h3><p class="story">{self.story(probe)}</p>'
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
            length = plural(b - a + 1, "commit") if a is not None and b is not None else ""
            state = "skip" if kind == "untestable" else "flaky"
            order = [p for p in self.probes if p in probes] + [p for p in probes if p not in self.probes]
            who = f"all {len(order)} probes" if len(order) > 1 and set(order) == set(self.probes) else ", ".join(order)
            rows.append(
                f'<tr><td class="probe-name" title="{e(", ".join(order))}">{e(who)}</td><td><span class="pill s-{state}">{e(kind)}</span></td>'
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
                f'<td><span class="pill s-{verdict}">{e(step.verdict)}</span></td>'
                f'<td>{"stored result" if step.reused else "ran"}</td></tr>'
            )
        found = "first fixed commit" if b.find_fix else "culprit"
        result = f"{found} {self.link(b.culprit)} {self.subject(b.culprit)}" if b.culprit else ""
        if not b.culprit and b.candidates:
            result = f"one of {len(b.candidates)}: " + " ".join(self.link(c) for c in b.candidates)
        if b.confidence is not None and b.confidence < 1.0:
            result = f"{result or 'no culprit'} (probability {b.confidence:.3f})"
        ran = sum(1 for s in b.steps if not s.reused)
        strategy = f" &middot; {e(b.strategy)}" if b.strategy else ""
        ends = f"bad {self.link(b.bad)} &rarr; good {self.link(b.good)}" if b.find_fix else f"good {self.link(b.good)} &rarr; bad {self.link(b.bad)}"
        return (
            f'<details open class="bisect"><summary><b>#{e(b.session_id)}</b> <span class="probe-name">{e(b.probe)}</span>: '
            f"{ends} &middot; {e(b.status)}{strategy} &middot; {result or 'no culprit'}"
            f' <span class="muted">({plural(len(b.steps), "step")}, {ran} ran)</span></summary>'
            '<table class="list"><thead><tr><th>step</th><th>commit</th><th>subject</th><th>verdict</th><th>result</th></tr></thead>'
            f"<tbody>{''.join(steps) or '<tr><td colspan=5 class=muted>no steps</td></tr>'}</tbody></table></details>"
        )

    def bisects_section(self) -> str:
        body = "".join(self.bisect(b) for b in sorted(self.data.bisects, key=lambda b: b.session_id, reverse=True))
        return f'<section id="bisects"><h2>Bisects</h2>{body or "<p class=muted>No bisects.</p>"}</section>'

    def environments_section(self) -> str:
        fields = ("device", "gpu_name", "compute_capability", "driver", "cuda", "torch", "flashinfer", "python", "host")
        heads = "".join(f"<th>{f.replace('_', ' ')}</th>" for f in ("fingerprint", *fields, "facts"))
        rows = []
        for env in self.data.environments:
            values = "".join(f"<td>{e(v) if (v := getattr(env, f)) is not None else '<span class=muted>&ndash;</span>'}</td>" for f in fields)
            facts = e(", ".join(f"{k}={v}" for k, v in env.facts)) or "<span class=muted>&ndash;</span>"
            rows.append(f'<tr><td><code title="{e(env.fingerprint)}">{e(env.fingerprint[:16])}</code></td>{values}<td>{facts}</td></tr>')
        body = "".join(rows) or f'<tr><td colspan="{len(fields) + 2}" class="muted">no environments</td></tr>'
        return f'<section id="environments"><h2>Environments</h2><table class="list"><thead><tr>{heads}</tr></thead><tbody>{body}</tbody></table></section>'



def render_html(data: ReportData) -> str:
    page = _Page(data)
    parts: Iterable[str] = (
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{e(CSP)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="referrer" content="no-referrer">',
        '<link rel="icon" href="data:,">',
        f"<title>regtrack report: {e(data.repository)}</title>",
        f"<style>{STYLE}</style></head><body>",
        page.header(),
        page.probes_section(),
        page.overview(),
        page.timeline(),
        page.transitions_section(),
        page.stretches_section(),
        page.bisects_section(),
        page.environments_section(),
        f"<footer>regtrack report &middot; one self-contained page: nothing is fetched when it is viewed &middot; generated {e(data.generated_at.isoformat())}</footer>",
        "</body></html>",
    )
    return "\n".join(parts) + "\n"


__all__ = ["CSP", "render_html"]
