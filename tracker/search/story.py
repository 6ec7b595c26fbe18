"""A probe's history in one line, the way scans, the scheduled job and the CLI tell it."""

from __future__ import annotations

from tracker.core.records import CommitInfo, TransitionKind
from tracker.core.results import ProbeScan
from tracker.core.verdicts import State


def story(scan: ProbeScan, line: list[CommitInfo]) -> str:
    """The probe's history, newest first: "bad since R (reverts F, #n); fixed before by F; first broken by X"."""
    if not scan.transitions:
        states = {s for s in scan.states if s is not None}
        if states == {State.BAD}:
            return "no transition: bad throughout"
        return "no transition: " + ("good throughout" if State.GOOD in states else "untestable")
    by_sha = {c.sha: c for c in line}
    parts = []
    for position, t in enumerate(reversed(scan.transitions)):
        number = by_sha[t.sha].pr_number
        pr = f", #{number}" if number else ""
        paired = f" ({t.pair_kind} {t.pairs_with[:12]}{pr})" if t.pairs_with else (f" (#{number})" if number else "")
        where = t.sha[:12] if len(t.candidates) == 1 else f"one of {len(t.candidates)} commits up to {t.sha[:12]}"
        regression = t.kind is TransitionKind.REGRESSION
        if position == 0:
            parts.append(f"{'bad' if regression else 'good'} since {where}{paired}")
        elif position == len(scan.transitions) - 1 and regression:
            parts.append(f"first broken by {where}{paired}")
        else:
            parts.append(f"{'broken' if regression else 'fixed'} before by {where}{paired}")
    return "; ".join(parts)
