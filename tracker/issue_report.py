"""What an issue about a stored regression needs, gathered from the store and the repository:
the culprit and its parent, the newest run of each case at both, the environments, the culprit's
verification, its revert / re-land pair, and the probe's command line when it is a command.
``tracker.report.issue_markdown`` writes the issue from it; nothing is run.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING

from probes.command import CommandCheck
from probes.sources import ADHOC_PREFIX, Source
from tracker.core.records import CommitInfo, RunRow, TransitionKind, TransitionRecord
from tracker.core.verdicts import BAD_OUTCOMES
from tracker.queries import regressions_of, runs_of_commits
from tracker.report.issue_markdown import CaseAtCommit, RegressionIssue
from tracker.targets.revisions import ROOT_PATH

if TYPE_CHECKING:
    from probes.api import Probe
    from tracker.workspace import Workspace


def regression_issues(ws: Workspace, only_open: bool, probes: Sequence[Probe] = ()) -> list[RegressionIssue]:
    """An issue for each stored regression of the target (only those not fixed since, with
    ``only_open``), oldest first. ``probes``: probes at hand whose command lines are not in the
    target's config (a ``--command`` of this process)."""
    repo_id = ws.store.repository(ws.repo.path)
    found = regressions_of(ws.store.transitions(repo_id, ws.target.name), only_open)
    return issues_of(ws, found, probes)


def issues_of(
    ws: Workspace, regressions: Sequence[TransitionRecord], probes: Sequence[Probe] = ()
) -> list[RegressionIssue]:
    """An issue for each of ``regressions``, stored transitions of the target."""
    if not regressions:
        return []
    repo_id = ws.store.repository(ws.repo.path)
    transitions = ws.store.transitions(repo_id, ws.target.name)
    environments = dict(ws.store.environments(repo_id))
    remote = ws.repo.remote_url()
    return [
        RegressionIssue(
            probe=t.probe,
            culprit=_commit(ws, repo_id, t.sha),
            parent=_parent(ws, repo_id, t.sha),
            candidates=t.candidates,
            **_results(ws, repo_id, t),
            environments=environments,
            remote_url=remote,
            verification=ws.store.verification(repo_id, ws.target.name, t.probe, t.sha),
            pair_kind=t.pair_kind,
            paired=_commit(ws, repo_id, t.pairs_with) if t.pairs_with else None,
            fixed_by=_fix_after(ws, repo_id, t, transitions),
            command=_command_line(ws, t.probe, probes),
            ad_hoc=t.probe.startswith(ADHOC_PREFIX),
        )
        for t in regressions
    ]


def _commit(ws: Workspace, repo_id: int, sha: str) -> CommitInfo:
    return ws.store.commit(repo_id, sha) or ws.repo.commit_info(sha)


def _parent(ws: Workspace, repo_id: int, sha: str) -> CommitInfo | None:
    parents = _commit(ws, repo_id, sha).parents
    return _commit(ws, repo_id, parents[0]) if parents else None


def _results(ws: Workspace, repo_id: int, t: TransitionRecord) -> dict[str, tuple[CaseAtCommit, ...]]:
    """The newest run of each case at the culprit (every probe) and at its parent (this probe)."""
    parents = _commit(ws, repo_id, t.sha).parents
    shas = [*parents[:1], t.sha]
    paths = (ROOT_PATH,) if t.probe.startswith(ADHOC_PREFIX) else ws.target.paths
    runs = runs_of_commits(ws.store, ws.repo, repo_id, paths, shas).runs
    at_parent = [r for r in runs if parents and r.sha == parents[0] and r.probe_name == t.probe]
    return {
        "at_culprit": _newest_per_case([r for r in runs if r.sha == t.sha]),
        "at_parent": _newest_per_case(at_parent),
    }


def _newest_per_case(runs: Sequence[RunRow]) -> tuple[CaseAtCommit, ...]:
    """``runs`` (newest first) as one result per probe, case, environment and dtype, in probe and case order."""
    grouped: dict[tuple[str, str, str, str | None], list[RunRow]] = defaultdict(list)
    for r in runs:
        grouped[r.probe_name, r.case_id, r.fingerprint, r.dtype].append(r)
    results = [_case_result(attempts) for attempts in grouped.values()]
    return tuple(sorted(results, key=lambda r: (r.probe, r.case, r.fingerprint, r.dtype or "")))


def _case_result(attempts: Sequence[RunRow]) -> CaseAtCommit:
    """The newest of a case's runs (``attempts``, newest first), with how many of them failed."""
    newest = attempts[0]
    return CaseAtCommit(
        probe=newest.probe_name,
        case=newest.case_id,
        fingerprint=newest.fingerprint,
        dtype=newest.dtype,
        outcome=newest.outcome,
        signature=newest.signature,
        metrics={name: value for name, value in newest.metrics.items() if isinstance(value, int | float)},
        attempts=len(attempts),
        failed=sum(r.outcome in BAD_OUTCOMES for r in attempts),
    )


def _fix_after(
    ws: Workspace, repo_id: int, regression: TransitionRecord, transitions: Sequence[TransitionRecord]
) -> CommitInfo | None:
    """The first fix of the regression's probe stored after it (``transitions``: oldest first), if any."""
    keys = [(t.probe, t.sha, t.kind) for t in transitions]
    key = (regression.probe, regression.sha, regression.kind)
    later = transitions[keys.index(key) + 1 :] if key in keys else []
    fix = next((t for t in later if t.probe == regression.probe and t.kind is TransitionKind.FIX), None)
    return _commit(ws, repo_id, fix.sha) if fix else None


def _command_line(ws: Workspace, probe: str, probes: Sequence[Probe]) -> tuple[str, ...] | None:
    """The probe's command line when it is a command: from ``probes`` or the target's config."""
    for known in probes:
        if known.name == probe and isinstance(known.check, CommandCheck):
            return tuple(known.check.argv)
    spec = ws.target.probe_specs.get(probe)
    return spec.command if spec is not None and spec.source is Source.COMMAND else None
