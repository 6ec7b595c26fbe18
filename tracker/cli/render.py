"""How results look on a terminal (rich) and in JSON; no logic beyond formatting."""

from __future__ import annotations

import re
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len
from rich.console import Group
from rich.table import Table
from rich.text import Text

from tracker.core.comparison import is_error_metric
from tracker.core.records import CommitInfo, RunRow
from tracker.core.verdicts import Outcome, Verdict
from tracker.queries import CommitRuns, reason
from tracker.search.story import story

if TYPE_CHECKING:
    from tracker.bisect_options import BisectReport
    from tracker.core.comparison import CaseRow, Comparison, MetricChange
    from tracker.core.records import TransitionRecord
    from tracker.core.results import ScanReport, TrackResult
    from tracker.core.verification import Verification
    from tracker.demo.walkthrough import DemoResult
    from tracker.probing import MeasuredRow

# C0 and C1 control characters but tab and newline: a terminal acts on them (ESC starts a sequence).
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# Signatures can run to hundreds of characters (one per failing case); tables and step lines
# show this many, --json all of them.
SIGNATURE_WIDTH = 80
# The least of a run's reason a table of runs shows, however narrow the terminal.
REASON_MIN_WIDTH = 20
STYLE = {
    "good": "green",
    "pass": "green",
    "bad": "red",
    "fail": "red",
    "crash": "red",
    "timeout": "red",
    "skip": "yellow",
    "error": "yellow",
}


def styled(word: str) -> Text:
    return Text(word, style=STYLE.get(word, ""))


def short(sha: str) -> str:
    return sha[:12]


def printable(text: str) -> str:
    """Text from a repository or a probe with its control characters spelled out (``\\x1b``), so a
    commit subject cannot send escape sequences to the terminal."""
    return CONTROL.sub(lambda match: match.group().encode("unicode_escape").decode(), text)


def cut(text: str, width: int = SIGNATURE_WIDTH) -> str:
    """``text`` in at most ``width`` characters, "…" ending it when it was longer."""
    return text if len(text) <= width else text[: width - 1] + "…"


def signature_cell(signature: str | None) -> Text:
    return Text(cut(printable(signature or "")))


def plain(text: str) -> Text:
    """A table cell of ``printable`` text: a bare string in a rich table is read as markup, and a
    subject such as "Mount [/dev/shm]" would fail to parse."""
    return Text(printable(text))


def commit_json(commit: CommitInfo) -> dict[str, Any]:
    return {**asdict(commit), "authored_at": commit.authored_at.isoformat()}


def measurements_table(rows: list[MeasuredRow]) -> Table:
    table = Table("commit", "subject", "probe", "verdict", "reused", "signature")
    for r in rows:
        reused = "yes" if r.reused else ""
        subject, verdict = plain(r.subject[:60]), styled(r.verdict.value)
        table.add_row(short(r.sha), subject, plain(r.probe), verdict, reused, signature_cell(r.signature))
    return table


def run_json(run: RunRow, found: CommitRuns, rederived: dict[int, Outcome] | None = None) -> dict[str, Any]:
    """The whole run, with its ``reason`` whole; ``measured_at`` and ``same_tree`` where its result
    was measured at another commit than the one it is listed under."""
    data = asdict(run)
    data["outcome"] = run.outcome.value
    data["started_at"] = run.started_at.isoformat()
    data["reason"] = reason(run)
    if rederived is not None:
        data["outcome_at_tolerance"] = rederived[run.id].value
    elsewhere = found.elsewhere(run)
    if elsewhere is not None:
        data["measured_at"], data["same_tree"] = elsewhere
    return data


def measured_elsewhere(found: CommitRuns, run: RunRow) -> str:
    """ "X, same tree" or "X, same files read" where the run's result was measured at commit X; else empty."""
    elsewhere = found.elsewhere(run)
    if elsewhere is None:
        return ""
    sha, same_tree = elsewhere
    return f"{short(sha)}, {'same tree' if same_tree else 'same files read'}"


def runs_table(found: CommitRuns, title: str, width: int, rederived: dict[int, Outcome] | None = None) -> Table:
    """One row per run, its reason last and on one line, cut ("…"; ``--json`` has it whole) to what
    ``width`` (the terminal's, or a log's 160 columns) leaves after the other columns, but never
    under ``REASON_MIN_WIDTH``; where even that is too wide, the other columns wrap."""
    headers = ["when", "commit", "subject", "probe", "case", "outcome", "s", "env"]
    headers += ["at tolerance"] if rederived is not None else []
    shown_elsewhere = any(found.elsewhere(r) for r in found.runs)
    headers += ["measured at"] if shown_elsewhere else []
    rows = [_run_cells(found, r, rederived, shown_elsewhere) for r in found.runs]
    table = Table(title=title)
    for header in headers:
        table.add_column(header, no_wrap=header == "measured at")
    table.add_column("reason", no_wrap=True, max_width=_reason_width(headers, rows, width))
    for r, cells in zip(found.runs, rows):
        table.add_row(*cells, Text(" ".join(printable(reason(r) or "").split())))
    return table


def _run_cells(found: CommitRuns, r: RunRow, rederived: dict[int, Outcome] | None, shown_elsewhere: bool) -> list[Text]:
    cells = [
        Text(r.started_at.strftime("%Y-%m-%d %H:%M")),
        Text(short(r.sha)),
        plain(r.subject[:48]),
        plain(f"{r.probe_name} v{r.probe_version}"),
        plain(r.case_id),
        styled(r.outcome.value),
        Text(f"{r.duration_s:.2f}"),
        plain(r.gpu_name or "cpu"),
    ]
    cells += [styled(rederived[r.id].value)] if rederived is not None else []
    return cells + ([Text(measured_elsewhere(found, r))] if shown_elsewhere else [])


def _reason_width(headers: list[str], rows: list[list[Text]], width: int) -> int:
    """``width`` less every other column's widest cell, a space each side of every cell and the borders."""
    others = sum(max([cell_len(header), *(row[i].cell_len for row in rows)]) for i, header in enumerate(headers))
    return max(width - others - (3 * (len(headers) + 1) + 1), REASON_MIN_WIDTH)


def run_outputs(found: CommitRuns) -> Group:
    """Each run's kept output (its detail) as stored, after a blank line and a line naming the run,
    newest first."""
    return Group(*(part for r in found.runs for part in [Text(""), *_output_block(found, r)]))


def _output_block(found: CommitRuns, run: RunRow) -> list[Text]:
    elsewhere = measured_elsewhere(found, run)
    where = f", measured at {elsewhere}" if elsewhere else ""
    heading = plain(
        f"{run.probe_name} v{run.probe_version} (case {run.case_id}): {run.outcome.value}, "
        f"{run.started_at:%Y-%m-%d %H:%M}{where}"
    )
    heading.stylize("bold")
    return [heading, plain(run.detail.rstrip()) if run.detail.strip() else Text("no output kept", style="dim")]


def commit_header(commit: CommitInfo) -> Text:
    pr = f" (#{commit.pr_number})" if commit.pr_number else ""
    reverts = f"\nreverts {commit.reverts_sha}" if commit.reverts_sha else ""
    return plain(
        f"{commit.sha}\n{commit.subject}{pr if pr not in commit.subject else ''}\n"
        f"{commit.author}, {commit.authored_at:%Y-%m-%d %H:%M %Z}{reverts}"
    )


def bisect_summary(report: BisectReport) -> Group:
    lines: list[Text] = []
    if report.no_culprit:
        flakes = "no culprit: the failures look like flakes, not a commit of the range"
        lines.append(Text(f"{flakes} (probability {report.confidence:.3f})", style="bold"))
    elif report.culprit is not None:
        c = report.culprit
        sure = "" if report.confidence == 1.0 else f" (probability {report.confidence:.3f})"
        lines.append(Text.assemble(f"{report.found}: ", (c.sha, "bold"), sure, f"\n  {printable(c.subject)}"))
        if report.fail_rate_after is not None and report.confidence < 1.0:
            before = "no runs" if report.fail_rate_before is None else f"{report.fail_rate_before:.0%} of runs"
            lines.append(Text(f"  failures: {before} before it, {report.fail_rate_after:.0%} of runs from it on"))
        for label, m in (("at the culprit", report.culprit_measurement), ("at its parent", report.parent_measurement)):
            if m is not None:
                metrics = ", ".join(f"{k}={v:.3g}" for k, v in m.metrics.items())
                said = f"{m.verdict.value}; {cut(m.signature or 'no failure')}{'; ' + metrics if metrics else ''}"
                lines.append(plain(f"  {label} ({short(m.sha)}): {said}"))
    else:
        lines.append(
            Text(f"the {report.found} is one of {len(report.candidates)} (untestable commits hide it):", style="bold")
        )
        lines += [plain(f"  {short(c.sha)} {c.subject}") for c in report.candidates]
    if report.verification is not None:
        lines += verification_lines(report.verification)
    how = report.strategy + (f", switched to Bayesian: {report.switch_reason}" if report.switch_reason else "")
    session = (
        f"session {report.session_id}" if report.session_id is not None else "every one stored, no session recorded"
    )
    checking = f" ({report.check_executions} checking the culprit)" if report.check_executions else ""
    lines.append(
        Text(
            f"probe {report.probe} ({how}): {report.executions} executions{checking} in {report.rounds} rounds, "
            f"{report.reused} results reused from the store ({session})"
        )
    )
    return Group(*lines)


def demo_verdicts(result: DemoResult) -> Table:
    table = Table(
        "commit", "event", *result.probes, title="probe verdicts on the story's key commits (expected in brackets)"
    )
    for row in result.rows:
        cells = []
        for probe in result.probes:
            seen, expected = row.verdicts[probe], row.expected[probe]
            cells.append(Text.assemble(styled(seen), f" [{expected}]" if expected != seen else ""))
        table.add_row(short(row.sha), row.label, *cells)
    return table


def scan_summary(report: ScanReport) -> Group:
    first, last = report.line[0], report.line[-1]
    parts: list[Any] = [Text(f"{len(report.line)} commits, {short(first.sha)}..{short(last.sha)}", style="bold")]
    table = Table("probe", "kind", "commit", "subject", "pairs with")
    for t in report.transitions:
        pair = f"{t.pair_kind} {short(t.pairs_with)}" if t.pairs_with else ""
        where = short(t.sha) if len(t.candidates) == 1 else f"one of {len(t.candidates)} up to {short(t.sha)}"
        table.add_row(
            t.probe,
            styled("bad" if t.kind.value == "regression" else "good").append(f" {t.kind.value}"),
            where,
            plain(report.commits[t.sha].subject[:70]),
            pair,
        )
    parts.append(table)
    for scan in report.probes:
        parts.append(Text(f"{scan.probe}: {story(scan, report.line)}"))
        for s in scan.stretches:
            parts.append(Text(f"  {s.kind} from {short(s.first)} to {short(s.last)}", style="yellow"))
        for c in scan.changes:
            change = f"{c.change:+.1%} [{c.low:+.1%}, {c.high:+.1%}]"
            said = f"  {c.metric} ({c.case}) {c.way} at {short(c.sha)} since {short(c.previous)}: {change}"
            parts.append(plain(f"{said} ({c.before} and {c.after} executions)"))
        for n in scan.noise:
            parts.append(plain(f"  {n.metric} ({n.case}) noise {n.noise:.1%} over {n.points} revisions"))
    for checked in report.verifications:
        parts.append(plain(f"{checked.probe} regression at {short(checked.culprit)}:"))
        parts += verification_lines(checked)
    parts.append(Text(f"{report.executions} executions, {report.reused} results reused from the store"))
    return Group(*parts)


def track_summary(result: TrackResult, reports: list[Any]) -> Group:
    parts: list[Any] = []
    if result.scan is None:
        parts.append(Text(f"nothing new on {result.branch} since {short(result.head)}"))
    else:
        since = f"since {short(result.since)}" if result.since else "(baseline)"
        parts.append(
            Text(
                f"{result.commits} new commits on {result.branch} {since} up to {short(result.head)}; "
                f"{result.scan.executions} executions"
            )
        )
        parts.append(scan_summary(result.scan))
    for r in result.new_regressions:
        where = f"in {r.transition.probe} at {short(r.commit.sha)} {r.commit.subject}"
        parts.append(
            Text.assemble(("new regression ", "bold red"), printable(f"{where}: {cut(r.measurement.signature or '')}"))
        )
        if r.verification is not None:
            parts += verification_lines(r.verification)
    for h in result.at_head:
        if h.failing:
            parts.append(
                Text.assemble(
                    (f"{h.probe} fails at {short(result.head)}", "bold red"),
                    printable(f": {h.failing_since}; ") + cut(printable(h.measurement.signature or "")),
                )
            )
        elif h.verdict is Verdict.SKIP:
            parts.append(
                Text.assemble(
                    (f"{h.probe} is untestable at {short(result.head)}", "yellow"),
                    ": " + cut(printable(h.measurement.signature or "")),
                )
            )
    parts += [Text(f"wrote {path}") for path in reports]
    return Group(*parts)


def regressions_table(found: list[TransitionRecord], commits: dict[str, CommitInfo | None], only_open: bool) -> Table:
    table = Table(
        "probe",
        "commit",
        "subject",
        "PR",
        "pairs with",
        "found",
        title="open regressions" if only_open else "regressions",
    )
    for t in found:
        commit = commits.get(t.sha)
        pair = f"{t.pair_kind} {short(t.pairs_with)}" if t.pairs_with else ""
        table.add_row(
            t.probe,
            short(t.sha),
            plain(commit.subject[:60] if commit else ""),
            f"#{commit.pr_number}" if commit and commit.pr_number else "",
            pair,
            f"{t.found_at:%Y-%m-%d %H:%M}" if t.found_at else "",
        )
    return table


def comparison_view(comparison: Comparison) -> Group:
    """Both revisions, one row per case with what got worse first, and a line per probe whose verdict
    changed or that could not be judged at one side."""
    sides = (("A", comparison.a), ("B", comparison.b))
    heading = [plain(f"{side} {short(commit.sha)} {commit.subject[:70]}") for side, commit in sides]
    table = Table("probe", "case", "change", "A", "B", "metric", "A value", "B value", "B/A", "why")
    for row in comparison.rows:
        table.add_row(plain(row.probe), plain(row.case), *_comparison_cells(row))
    lines = []
    for pair in comparison.probes:
        a, b = pair.a.unjudged or pair.a.verdict.value, pair.b.unjudged or pair.b.verdict.value
        if a != b or pair.a.unjudged:
            lines.append(plain(f"{pair.probe}: {a} at A, {b} at B"))
    return Group(*heading, table, *lines)


def _comparison_cells(row: CaseRow) -> list[Text]:
    sides = [
        Text.assemble(styled(case.outcome.value), (f"\n{source.value}", "dim")) if case else Text("no case", "dim")
        for case, source in ((row.a, row.source_a), (row.b, row.source_b))
    ]
    metrics = [*row.metrics, row.duration]
    values = [Text("\n".join(_metric_value(getattr(m, side)) for m in metrics)) for side in ("a", "b")]
    ratios = Text("\n").join(_ratio_cell(m) for m in metrics)
    worse = row.b if row.b and row.b.outcome is not Outcome.PASS else row.a
    why = signature_cell(worse.signature if worse else None)
    return [Text(row.change.value), *sides, plain("\n".join(m.name for m in metrics)), *values, ratios, why]


def _metric_value(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"


def _ratio_cell(change: MetricChange) -> Text:
    """B/A, red where an error metric grew, green where it shrank; the note where it is no plain number."""
    ratio = change.ratio
    if ratio is None or change.note:
        return Text(change.note)
    style = ""
    if is_error_metric(change.name) and ratio != 1:
        style = "red" if ratio > 1 else "green"
    return Text(f"{ratio:.3g}", style=style)


VERIFICATION_STYLE = {"confirmed": "green", "not confirmed": "bold red", "does not apply": "yellow"}


def verification_lines(checked: Verification) -> list[Text]:
    """A culprit's check: its answer and why, then the commands that would tell more."""
    status = checked.status.value
    head = Text.assemble("  verification: ", (status, VERIFICATION_STYLE.get(status, "yellow")))
    lines = [head, plain(f"    {checked.explanation}")]
    lines += [plain(f"    next: {step}") for step in checked.next_steps]
    return lines
