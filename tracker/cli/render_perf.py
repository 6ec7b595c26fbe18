"""How the CLI shows a metric bisect's answer: the first slower commit, or why there is none."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group
from rich.text import Text

from tracker.cli.render import plain, printable, short, verification_lines

if TYPE_CHECKING:
    from tracker.metric_bisect import MetricBisectReport


def metric_bisect_summary(report: MetricBisectReport) -> Group:
    metric, limit = report.metric.name, f"{report.threshold:.0%}"
    end = f"{metric} {report.end_effect.said()} at {short(report.bad)} against {short(report.good)}"
    lines: list[Text] = []
    if report.no_regression:
        why = "not slower" if report.end_call.value == "not_slower" else "not shown slower"
        lines.append(Text(f"no regression: the bad end is {why} than the good end by more than {limit}", style="bold"))
        lines.append(plain(f"  {end}"))
    elif report.culprit is not None:
        c = report.culprit
        lines.append(Text.assemble(f"{report.found}: ", (c.sha, "bold"), f"\n  {printable(c.subject)}"))
        if report.culprit_effect is not None:
            lines.append(plain(f"  {metric} against its parent: {report.culprit_effect.said()}"))
        lines.append(plain(f"  {end}"))
    else:
        hidden = f"the {report.found} is one of {len(report.candidates)} (ambiguous or untestable commits hide it):"
        lines.append(Text(hidden, style="bold"))
        lines += [plain(f"  {short(c.sha)} {c.subject}") for c in report.candidates]
    if report.verification is not None:
        lines += verification_lines(report.verification)
    lines.append(
        Text(
            f"probe {report.probe}, {metric} slower by more than {limit} at {report.confidence:.0%}: "
            f"{len(report.steps)} steps judged, {report.executions} executions, "
            f"{report.reused} stored executions reused"
        )
    )
    return Group(*lines)
