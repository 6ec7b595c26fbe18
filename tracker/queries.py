"""Questions about the stored history: filters over runs, open regressions, verdicts re-derived
under another tolerance. Pure functions over rows the store returns.

``probes.demo_backend.checks`` (and with it torch) is imported only by the functions that re-derive verdicts,
so that reading the history, as the HTML report does, does not load torch.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING

from tracker.core.records import RunRow, TransitionRecord
from probes.api import Outcome

if TYPE_CHECKING:
    from probes.demo_backend.checks import Tolerance

ERROR_METRICS = ("rel_err", "max_abs_err", "nonfinite")


def filter_runs(
    runs: Iterable[RunRow],
    since: datetime | None = None,
    until: datetime | None = None,
    environment: str | None = None,
) -> list[RunRow]:
    """``environment`` matches a fingerprint prefix or a substring of the GPU name (``cpu`` for none)."""
    kept = []
    for run in runs:
        if since is not None and run.started_at < since:
            continue
        if until is not None and run.started_at > until:
            continue
        if environment is not None and not _matches_environment(run, environment):
            continue
        kept.append(run)
    return kept


def _matches_environment(run: RunRow, wanted: str) -> bool:
    gpu = (run.gpu_name or "cpu").lower()
    return run.fingerprint.startswith(wanted) or wanted.lower() in gpu


def verdict_under(run: RunRow, tolerance: Tolerance) -> Outcome:
    """The run's outcome re-derived from its stored error metrics; runs without them keep theirs."""
    from probes.demo_backend.checks import attention_verdict

    if run.outcome not in (Outcome.PASS, Outcome.FAIL) or not all(k in run.metrics for k in ERROR_METRICS):
        return run.outcome
    return attention_verdict(run.metrics, tolerance)


def parse_tolerance(rel_err: float, max_abs_err: float | None) -> Tolerance:
    from probes.demo_backend.checks import Tolerance

    return Tolerance(rel_err=rel_err, max_abs_err=math.inf if max_abs_err is None else max_abs_err)


def regressions_of(transitions: Iterable[TransitionRecord], only_open: bool) -> list[TransitionRecord]:
    """Regressions, oldest first; open ones are those after which their probe has no fix."""
    ordered = list(transitions)
    found = []
    for position, t in enumerate(ordered):
        if t.kind != "regression":
            continue
        fixed = any(later.probe == t.probe and later.kind == "fix" for later in ordered[position + 1 :])
        if not (only_open and fixed):
            found.append(t)
    return found
