"""Questions about the stored history: filters over runs, open regressions, verdicts re-derived
under another tolerance, the runs that stand for some commits, why a run did not pass. Pure
functions over rows the store returns, but ``history_runs``, ``runs_at``, ``stored_regressions``,
``runs_of_commits`` and ``check_filters``, which fetch them.

A result belongs to a target tree, not to a commit (see ``tracker.measure``): the runs of a commit
are those measured at it and those measured at another commit with its tree, which say so; a run
copied from another tree whose files the probe read are the same here (read reuse) says where the
result was measured too.

``probes.demo_backend.checks`` (and with it torch) is imported only by the functions that re-derive verdicts,
so that reading the history, as the HTML report does, does not load torch.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING

from tracker.core.errors import UsageError
from tracker.core.records import CommitInfo, RunRow, TransitionRecord
from tracker.core.verdicts import Outcome, reason_of

if TYPE_CHECKING:
    from db.store import Store
    from probes.demo_backend.checks import Tolerance
    from tracker.targets.revisions import Repo
    from tracker.workspace import Workspace

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
        if environment is not None and not environment_matches(run.fingerprint, run.gpu_name, environment):
            continue
        kept.append(run)
    return kept


def environment_matches(fingerprint: str, gpu_name: str | None, wanted: str) -> bool:
    return fingerprint.startswith(wanted) or wanted.lower() in (gpu_name or "cpu").lower()


def check_filters(store: Store, repo_id: int, probes: Sequence[str], environment: str | None) -> None:
    """A filter that names no probe or environment stored for the repository is a mistake (a typo,
    another repository's name), not an empty answer; one that is stored but has no runs where it is
    asked is an empty answer."""
    stored = store.probe_names(repo_id)
    for probe in probes:
        if probe not in stored:
            raise UsageError(
                f"--probe {probe}: no run of it is stored for this repository; "
                f"stored probes: {', '.join(stored) or 'none'}"
            )
    if environment is None:
        return
    environments = store.environments(repo_id)
    if not any(environment_matches(fingerprint, info.gpu_name, environment) for fingerprint, info in environments):
        named = ", ".join(f"{info.gpu_name or 'cpu'} ({fingerprint})" for fingerprint, info in environments) or "none"
        raise UsageError(
            f"--env {environment} matches no environment stored for this repository "
            f"(a fingerprint prefix or part of the GPU name); stored: {named}"
        )


def reason(run: RunRow) -> str | None:
    """Why the run did not pass (``tracker.core.verdicts.reason_of``)."""
    return reason_of(run.outcome, run.signature, run.detail)


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


def stored_regressions(ws: Workspace, only_open: bool) -> tuple[list[TransitionRecord], dict[str, CommitInfo | None]]:
    """The target's regressions (``regressions_of``) and the stored commit of each."""
    repo_id = ws.store.repository(ws.repo.path)
    found = regressions_of(ws.store.transitions(repo_id, ws.target.name), only_open)
    return found, {t.sha: ws.store.commit(repo_id, t.sha) for t in found}


@dataclass(frozen=True)
class CommitRuns:
    """Runs listed under the commits asked about, newest first; ``measured_at`` maps the id of a
    run that was measured at another commit with the same target tree to that commit, and
    ``copied_from`` the id of a run copied by read reuse to the commit its result was measured at."""

    runs: list[RunRow]
    measured_at: dict[int, str] = field(default_factory=dict)
    copied_from: dict[int, str] = field(default_factory=dict)

    def elsewhere(self, run: RunRow) -> tuple[str, bool] | None:
        """Where the run's result was measured, when not at the commit it is listed under, and
        whether that commit has the same target tree (else the same files read)."""
        if run.id in self.copied_from:
            return self.copied_from[run.id], False
        if run.id in self.measured_at:
            return self.measured_at[run.id], True
        return None


@dataclass(frozen=True)
class RunFilter:
    """What ``history_runs`` keeps of the stored runs; None: anything."""

    probe: str | None = None
    outcome: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    environment: str | None = None


def history_runs(ws: Workspace, wanted: RunFilter, range_spec: str | None, limit: int) -> CommitRuns:
    """The newest ``limit`` stored runs that ``wanted`` keeps, of the first-parent ``range_spec``
    (a run of a tree of the range listed under the range's first commit with that tree) or of any
    commit."""
    repo_id = ws.store.repository(ws.repo.path)
    check_filters(ws.store, repo_id, [wanted.probe] if wanted.probe else [], wanted.environment)
    if range_spec:
        found = runs_of_commits(
            ws.store, ws.repo, repo_id, ws.target.paths, ws.repo.line(range_spec), wanted.probe, wanted.outcome
        )
    else:
        found = CommitRuns(ws.store.runs(repo_id=repo_id, probe=wanted.probe, outcome=wanted.outcome))
    kept = filter_runs(found.runs, wanted.since, wanted.until, wanted.environment)[:limit]
    return _with_copies(ws.store, CommitRuns(kept, found.measured_at))


def runs_at(ws: Workspace, rev: str) -> tuple[CommitInfo, CommitRuns]:
    """``rev``'s commit and every stored run that stands for it."""
    sha = ws.repo.resolve(rev)
    repo_id = ws.store.repository(ws.repo.path)
    commit = ws.store.commit(repo_id, sha) or ws.repo.commit_info(sha)
    return commit, _with_copies(ws.store, runs_of_commits(ws.store, ws.repo, repo_id, ws.target.paths, [sha]))


def _with_copies(store: Store, found: CommitRuns) -> CommitRuns:
    """``found`` with the copies among its runs that were measured at another commit than the one
    they are listed under (a copy at its own commit comes from before the target's paths changed)."""
    listed = {r.id: r.sha for r in found.runs}
    measured_at = {run_id: sha for run_id, sha in found.measured_at.items() if run_id in listed}
    copied = {run_id: sha for run_id, sha in store.copied_from(sorted(listed)).items() if sha != listed[run_id]}
    return CommitRuns(found.runs, measured_at, copied)


def stand_ins(runs: Iterable[RunRow], trees: Mapping[str, str]) -> dict[int, str]:
    """For each run measured outside ``trees`` (asked commit -> its target tree, oldest first) at
    one of their trees, the first asked commit with that tree: the commit the run stands for."""
    first_with: dict[str, str] = {}
    for sha, tree in trees.items():
        first_with.setdefault(tree, sha)
    return {r.id: first_with[r.tree_hash] for r in runs if r.sha not in trees and r.tree_hash in first_with}


def runs_of_commits(
    store: Store,
    repo: Repo,
    repo_id: int,
    paths: Sequence[str],
    shas: Sequence[str],
    probe: str | None = None,
    outcome: str | None = None,
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
