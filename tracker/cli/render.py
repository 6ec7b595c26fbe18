"""How results look on a terminal (rich) and in JSON; no logic beyond formatting."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from probes.api import Outcome
from tracker.core.records import CommitInfo, RunRow
from tracker.core.verdicts import Verdict

if TYPE_CHECKING:
    from tracker.bisect_session import BisectReport
    from tracker.core.records import TransitionRecord
    from tracker.demo.walkthrough import DemoResult
    from tracker.measure import Measurement
    from tracker.scan import ScanReport
    from tracker.track import TrackResult

# C0 and C1 control characters but tab and newline: a terminal acts on them (ESC starts a sequence).
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# Signatures can run to hundreds of characters (one per failing case); tables and step lines
# show this many, --json all of them.
SIGNATURE_WIDTH = 80
STYLE = {"good": "green", "pass": "green", "bad": "red", "fail": "red", "crash": "red", "timeout": "red", "skip": "yellow", "error": "yellow"}


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


def measurement_row(commit: CommitInfo | None, probe: str, m: Measurement) -> dict[str, Any]:
    return {
        "sha": m.sha,
        "subject": commit.subject if commit else "",
        "probe": probe,
        "verdict": m.verdict.value,
        "signature": m.signature,
        "metrics": m.metrics,
        "reused": m.reused,
        "cases": {c.case_id: c.outcome.value for c in m.cases},
    }


def measurements_table(rows: list[dict[str, Any]]) -> Table:
    table = Table("commit", "subject", "probe", "verdict", "reused", "signature")
    for r in rows:
        table.add_row(short(r["sha"]), plain(r["subject"][:60]), plain(r["probe"]), styled(r["verdict"]), "yes" if r["reused"] else "", signature_cell(r["signature"]))
    return table


def run_json(run: RunRow, rederived: dict[int, Outcome] | None = None, measured_at: Mapping[int, str] | None = None) -> dict[str, Any]:
    """``measured_at``: the commit a run was measured at, for runs listed under another commit with the same target tree."""
    data = asdict(run)
    data["outcome"] = run.outcome.value
    data["started_at"] = run.started_at.isoformat()
    if rederived is not None:
        data["outcome_at_tolerance"] = rederived[run.id].value
    if measured_at and run.id in measured_at:
        data["measured_at"], data["same_tree"] = measured_at[run.id], True
    return data


def runs_table(runs: list[RunRow], title: str, rederived: dict[int, Outcome] | None = None, measured_at: Mapping[int, str] | None = None) -> Table:
    columns = ["when", "commit", "subject", "probe", "case", "outcome", "s", "env", "signature"]
    table = Table(*columns, *(["at tolerance"] if rederived is not None else []), title=title)
    if measured_at:
        table.add_column("measured at", no_wrap=True)
    for r in runs:
        extra = [styled(rederived[r.id].value)] if rederived is not None else []
        if measured_at:
            extra.append(Text(f"{short(measured_at[r.id])}, same tree" if r.id in measured_at else ""))
        table.add_row(
            r.started_at.strftime("%Y-%m-%d %H:%M"),
            short(r.sha),
            plain(r.subject[:48]),
            plain(f"{r.probe_name} v{r.probe_version}"),
            plain(r.case_id),
            styled(r.outcome.value),
            f"{r.duration_s:.2f}",
            plain(r.gpu_name or "cpu"),
            signature_cell(r.signature),
            *extra,
        )
    return table


def commit_header(commit: CommitInfo) -> Text:
    pr = f" (#{commit.pr_number})" if commit.pr_number else ""
    reverts = f"\nreverts {commit.reverts_sha}" if commit.reverts_sha else ""
    return plain(f"{commit.sha}\n{commit.subject}{pr if pr not in commit.subject else ''}\n{commit.author}, {commit.authored_at:%Y-%m-%d %H:%M %Z}{reverts}")


def bisect_summary(report: BisectReport) -> Group:
    lines: list[Text] = []
    if report.no_culprit:
        lines.append(Text(f"no culprit: the failures look like flakes, not a commit of the range (probability {report.confidence:.3f})", style="bold"))
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
                lines.append(plain(f"  {label} ({short(m.sha)}): {m.verdict.value}; {cut(m.signature or 'no failure')}{'; ' + metrics if metrics else ''}"))
    else:
        lines.append(Text(f"the {report.found} is one of {len(report.candidates)} (untestable commits hide it):", style="bold"))
        lines += [plain(f"  {short(c.sha)} {c.subject}") for c in report.candidates]
    how = report.strategy + (f", switched to Bayesian: {report.switch_reason}" if report.switch_reason else "")
    session = f"session {report.session_id}" if report.session_id is not None else "every one stored, no session recorded"
    lines.append(Text(
        f"probe {report.probe} ({how}): {report.executions} executions in {report.rounds} rounds, "
        f"{report.reused} results reused from the store ({session})"
    ))
    return Group(*lines)


def demo_verdicts(result: DemoResult) -> Table:
    table = Table("commit", "event", *result.probes, title="probe verdicts on the story's key commits (expected in brackets)")
    for row in result.rows:
        cells = []
        for probe in result.probes:
            seen, expected = row.verdicts[probe], row.expected[probe]
            cells.append(Text.assemble(styled(seen), f" [{expected}]" if expected != seen else ""))
        table.add_row(short(row.sha), row.label, *cells)
    return table


def scan_summary(report: ScanReport) -> Group:
    from tracker.scan import story

    first, last = report.line[0], report.line[-1]
    parts: list[Any] = [Text(f"{len(report.line)} commits, {short(first.sha)}..{short(last.sha)}", style="bold")]
    table = Table("probe", "kind", "commit", "subject", "pairs with")
    for t in report.transitions:
        pair = f"{t.pair.kind} {short(t.pair.sha)}" if t.pair else ""
        where = short(t.commit.sha) if len(t.candidates) == 1 else f"one of {len(t.candidates)} up to {short(t.commit.sha)}"
        table.add_row(t.probe, styled("bad" if t.kind.value == "regression" else "good").append(f" {t.kind.value}"), where, plain(t.commit.subject[:70]), pair)
    parts.append(table)
    for scan in report.probes:
        parts.append(Text(f"{scan.probe}: {story(scan, report.line)}"))
        for s in scan.stretches:
            kind = "untestable" if s.kind.value == "skip" else "flaky"
            parts.append(Text(f"  {kind} from {short(s.first)} to {short(s.last)}", style="yellow"))
    parts.append(Text(f"{report.executions} executions, {report.reused} results reused from the store"))
    return Group(*parts)


def track_summary(result: TrackResult, reports: list[Any]) -> Group:
    parts: list[Any] = []
    if result.scan is None:
        parts.append(Text(f"nothing new on {result.branch} since {short(result.head)}"))
    else:
        since = f"since {short(result.since)}" if result.since else "(baseline)"
        parts.append(Text(f"{result.commits} new commits on {result.branch} {since} up to {short(result.head)}; {result.scan.executions} executions"))
        parts.append(scan_summary(result.scan))
    for r in result.new_regressions:
        parts.append(Text.assemble(("new regression ", "bold red"), printable(f"in {r.transition.probe} at {short(r.transition.commit.sha)} {r.transition.commit.subject}: {cut(r.measurement.signature or '')}")))
    for h in result.at_head:
        if h.failing:
            parts.append(Text.assemble((f"{h.probe} fails at {short(result.head)}", "bold red"), printable(f": {h.failing_since}; ") + cut(printable(h.measurement.signature or ""))))
        elif h.verdict is Verdict.SKIP:
            parts.append(Text.assemble((f"{h.probe} is untestable at {short(result.head)}", "yellow"), ": " + cut(printable(h.measurement.signature or ""))))
    parts += [Text(f"wrote {path}") for path in reports]
    return Group(*parts)


def transition_json(t: TransitionRecord, commit: CommitInfo | None) -> dict[str, Any]:
    data = asdict(t)
    data["authored_at"] = t.authored_at.isoformat()
    data["found_at"] = t.found_at.isoformat() if t.found_at else None
    data["subject"] = commit.subject if commit else None
    data["pr_number"] = commit.pr_number if commit else None
    return data


def regressions_table(found: list[TransitionRecord], commits: dict[str, CommitInfo | None], only_open: bool) -> Table:
    table = Table("probe", "commit", "subject", "PR", "pairs with", "found", title="open regressions" if only_open else "regressions")
    for t in found:
        commit = commits.get(t.sha)
        pair = f"{t.pair_kind} {short(t.pairs_with)}" if t.pairs_with else ""
        table.add_row(t.probe, short(t.sha), plain(commit.subject[:60] if commit else ""), f"#{commit.pr_number}" if commit and commit.pr_number else "", pair, f"{t.found_at:%Y-%m-%d %H:%M}" if t.found_at else "")
    return table
