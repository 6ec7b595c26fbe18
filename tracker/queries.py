"""Questions about the stored history: filters over runs, open regressions, verdicts re-derived
under another tolerance, the runs that stand for some commits. Pure functions over rows the
store returns, but ``runs_of_commits``, which fetches them.

A result belongs to a target tree, not to a commit (see ``tracker.measure``): the runs of a commit
are those measured at it and those measured at another commit with its tree, which say so.

``probes.demo_backend.checks`` (and with it torch) is imported only by the functions that re-derive verdicts,
so that reading the history, as the HTML report does, does not load torch.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING

from probes.api import Outcome
from tracker.core.records import RunRow, TransitionRecord

if TYPE_CHECKING:
    from db.readonly import AnyStore
    from probes.demo_backend.checks import Tolerance
    from tracker.targets.revisions import Repo

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


@dataclass(frozen=True)
class CommitRuns:
    """Runs listed under the commits asked about, newest first; ``measured_at`` maps the id of a
    run that was measured at another commit with the same target tree to that commit."""

    runs: list[RunRow]
    measured_at: dict[int, str] = field(default_factory=dict)


def stand_ins(runs: Iterable[RunRow], trees: Mapping[str, str]) -> dict[int, str]:
    """For each run measured outside ``trees`` (asked commit -> its target tree, oldest first) at
    one of their trees, the first asked commit with that tree: the commit the run stands for."""
    first_with: dict[str, str] = {}
    for sha, tree in trees.items():
        first_with.setdefault(tree, sha)
    return {r.id: first_with[r.tree_hash] for r in runs if r.sha not in trees and r.tree_hash in first_with}


def runs_of_commits(
    store: AnyStore, repo: Repo, repo_id: int, paths: Sequence[str], shas: Sequence[str], probe: str | None = None, outcome: str | None = None
) -> CommitRuns:
    """The runs measured at ``shas`` and those of their target trees measured elsewhere, each of
    the latter listed under the asked commit it stands for (sha, subject and PR of that commit)."""
    trees = repo.tree_hashes(shas, paths)
    own = store.runs(repo_id=repo_id, probe=probe, shas=list(shas), outcome=outcome)
    same_tree = store.runs(repo_id=repo_id, probe=probe, outcome=outcome, trees=sorted(set(trees.values())))
    merged = sorted({r.id: r for r in [*own, *same_tree]}.values(), key=lambda r: r.id, reverse=True)
    standing = stand_ins(merged, {sha: trees[sha] for sha in shas})
    commits = {c.sha: c for c in repo.commit_infos(sorted(set(standing.values())))} if standing else {}
    runs = []
    for r in merged:
        commit = commits.get(standing.get(r.id, ""))
        runs.append(replace(r, sha=commit.sha, subject=commit.subject, pr_number=commit.pr_number) if commit else r)
    return CommitRuns(runs, {r.id: r.sha for r in merged if r.id in standing})
