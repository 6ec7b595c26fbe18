"""A ``ReportData`` as one JSON object: what ``regtrack report --json`` prints, the page's content.

Commits are listed once, in line order; everything else names a commit by its SHA, or, where a
long range would repeat it many times, by its index in ``commits``. A probe's cells are runs of
equal cells ``[first, count, state, runs, signature]`` covering the whole line; ``measured`` lists
the commits a stored run executed at (the others show their tree's result, measured elsewhere);
a series' points are ``[index, value, measured]`` triples. So a range of many thousand commits
stays small. ``report.schema.json`` beside this module describes the object.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from importlib import resources
from typing import Any

from tracker.core.json_schema import versioned
from tracker.core.records import CommitInfo, EnvironmentInfo, StepRow, StretchRecord
from tracker.report.ci import transition_fields
from tracker.report.model import Cell, ReportBisect, ReportData, Series

SCHEMA_FILE = "report.schema.json"


def report_json(data: ReportData) -> dict[str, Any]:
    """The report as plain JSON values, with the ``schema`` version first."""
    index = {commit.sha: position for position, commit in enumerate(data.commits)}
    return versioned(
        {
            "repository": data.repository,
            "generated_at": data.generated_at.isoformat(),
            "range": {
                "first": data.commits[0].sha if data.commits else None,
                "last": data.commits[-1].sha if data.commits else None,
            },
            "probes": list(data.probes),
            "commits": [_commit(c) for c in data.commits],
            "cells": {probe: _cell_runs(data, probe) for probe in data.probes},
            "measured": None if data.measured is None else sorted(index[s] for s in data.measured if s in index),
            "series": [_series(s, index) for s in data.series],
            "transitions": [transition_fields(t) for t in data.transitions],
            "stretches": [_stretch(s) for s in data.stretches],
            "bisects": [_bisect(b) for b in data.bisects],
            "environments": [_environment(e) for e in data.environments],
        }
    )


def schema_text() -> str:
    """The JSON Schema (draft 2020-12) of ``report_json``'s object, shipped with the package."""
    return resources.files(__package__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8")


def _commit(commit: CommitInfo) -> dict[str, Any]:
    return {
        "sha": commit.sha,
        "subject": commit.subject,
        "author": commit.author,
        "authored_at": commit.authored_at.isoformat(),
        "pr_number": commit.pr_number,
    }


def _cell_runs(data: ReportData, probe: str) -> list[list[Any]]:
    """The probe's cells along the line as runs of equal cells; untested commits are runs too."""
    found: list[list[Any]] = []
    previous: Cell | None = None
    for position, commit in enumerate(data.commits):
        cell = data.cell(commit.sha, probe)
        if cell == previous:
            found[-1][1] += 1
        else:
            found.append([position, 1, cell.state, cell.runs, cell.signature])
        previous = cell
    return found


def _series(series: Series, index: Mapping[str, int]) -> dict[str, Any]:
    return {
        "probe": series.probe,
        "case": series.case,
        "metric": series.metric,
        "environment": series.environment,
        "device": series.device,
        "dtype": series.dtype,
        "tolerance": series.tolerance,
        "points": [[index[p.sha], p.value, p.measured] for p in series.points],
    }


def _stretch(s: StretchRecord) -> dict[str, Any]:
    return asdict(s)


def _bisect(b: ReportBisect) -> dict[str, Any]:
    return {
        "session_id": b.session_id,
        "probe": b.probe,
        "good": b.good,
        "bad": b.bad,
        "status": b.status,
        "culprit": b.culprit,
        "candidates": list(b.candidates),
        "strategy": b.strategy,
        "confidence": b.confidence,
        "find_fix": b.find_fix,
        "steps": _steps(b.steps),
        "verification": b.verification.to_json() if b.verification is not None else None,
    }


def _steps(steps: Sequence[StepRow]) -> list[dict[str, Any]]:
    return [{**asdict(s), "created_at": s.created_at.isoformat()} for s in steps]


def _environment(e: EnvironmentInfo) -> dict[str, Any]:
    return {"fingerprint": e.fingerprint, **asdict(e), "facts": dict(e.facts)}
