"""A named culprit checked: the bad end measured with the culprit's change undone.

After a bisect names commit C before the bad end B (or a scan finds a regression at C), ``verify``
``verify_culprit`` writes B with C reverted (``tracker.targets.revert``: a commit on no branch, the user's checkout
untouched) and measures it with the same ``Prober``, so its result is stored by tree like any other
and a second check of the same culprit runs nothing. B passing without C confirms C; B still
failing says that something else breaks it too, with the runs that would tell what. Where C's
change no longer applies on B, C against its parent is what was checked, from their stored results.
Each check is stored (``Store.record_verification``), newest first.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence

from probes.api import Probe
from probes.sources import Source, adhoc_command_name, spec_of
from tracker.bisect_options import BisectReport
from tracker.core.measurements import Measurement
from tracker.core.records import CommitInfo, TransitionKind, TransitionRecord
from tracker.core.results import ProbeScan, ScanReport
from tracker.core.verdicts import State, Verdict
from tracker.core.verification import Verification, VerificationStatus
from tracker.measure import Prober
from tracker.targets.revert import Conflict, RevertFailed, revert_on

FIX_SEARCH = "skipped: a fix search; its answer is the first commit that passes, nothing to revert"
NOT_ASKED = "skipped: --no-verify"
NOT_CHECKED = (
    "not checked: the answer comes from stored results and no check of {culprit} is stored; "
    "`{command}` runs it (one execution)"
)
HIDDEN = "skipped: untestable or flaky commits hide the culprit among {count} candidates"

Measuring = Callable[[str, str], None]
"""Told (probe, bad end) as a check starts: ``Watch.measuring``."""


def check_culprit(report: BisectReport, prober: Prober, verify: bool, measuring: Measuring) -> None:
    """The bisect's culprit checked (or why not) into ``report``, its execution counted with the bisect's."""
    if report.culprit is None:
        return
    report.verification = unchecked(report, report.culprit, verify)
    if report.verification is not None:
        return
    measuring(report.probe, report.bad)
    before = prober.executions
    report.verification = verify_culprit(prober, report.culprit, report.bad, report.good)
    report.check_executions = prober.executions - before
    report.executions += report.check_executions


def unchecked(report: BisectReport, culprit: CommitInfo, verify: bool) -> Verification | None:
    """Why a bisect's culprit goes unchecked (a fix search, or not asked to); None where it is checked."""
    if report.find_fix:
        return skipped(report.probe, culprit.sha, report.bad, FIX_SEARCH)
    return None if verify else skipped(report.probe, culprit.sha, report.bad, NOT_ASKED)


def not_checked(report: BisectReport, culprit: CommitInfo, probe: Probe) -> Verification:
    """The culprit of an answer from stored results that no check is stored for: said, not run,
    since an answer from the store runs nothing unless asked to; with the command that asks."""
    command = f"regtrack bisect --good {report.good[:12]} --bad {report.bad[:12]} {probe_option(probe)} --verify"
    said = NOT_CHECKED.format(culprit=culprit.sha[:12], command=command)
    return skipped(report.probe, culprit.sha, report.bad, said)


def check_regressions(report: ScanReport, probers: dict[str, Prober], measuring: Measuring) -> None:
    """Each regression of the scan checked into ``report``."""
    for transition, bad in scan_suspects(report):
        measuring(transition.probe, bad)
        report.verifications.append(check_regression(report, probers[transition.probe], transition, bad))


def check_regression(report: ScanReport, prober: Prober, transition: TransitionRecord, bad: str) -> Verification:
    """One regression of the scan checked against ``bad``, its execution counted with the scan's."""
    before = prober.executions
    checked = verify_regression(prober, transition, report.commits[transition.sha], bad)
    report.executions += prober.executions - before
    return checked


def skipped(probe: str, culprit: str, bad: str, reason: str) -> Verification:
    """A check not made, and why."""
    return Verification(VerificationStatus.SKIPPED, probe, culprit, bad, reason)


def verify_culprit(prober: Prober, culprit: CommitInfo, bad: str, good: str | None = None) -> Verification:
    """Check ``culprit`` for ``prober``'s probe against ``bad``, where it fails; ``good`` is the
    searched range's good end, named in the runs suggested when the check does not confirm it.
    The answer is stored; measuring takes at most one execution (none where the tree is stored)."""
    probe = prober.probe.name
    undoes = _undone_fix(prober, culprit)
    try:
        reverted = revert_on(prober.repo.path, culprit.sha, bad, culprit.subject, prober.target.paths)
    except RevertFailed as failure:
        said = f"the check could not write {bad[:12]} without {culprit.sha[:12]}: {failure}"
        verification = Verification(VerificationStatus.UNTESTABLE, probe, culprit.sha, bad, said, undoes=undoes)
    else:
        if isinstance(reverted, Conflict):
            verification = _culprit_itself(prober, culprit, bad, reverted.paths, undoes)
        else:
            tree = prober.record_commits([reverted.sha])[reverted.sha]
            verification = _judged(prober, culprit, bad, prober.measure(reverted.sha, tree), good, undoes)
    prober.store.record_verification(prober.repo_id, prober.target.name, verification)
    return verification


def _judged(
    prober: Prober, culprit: CommitInfo, bad: str, measured: Measurement, good: str | None, undoes: str | None
) -> Verification:
    probe, c, b = prober.probe.name, culprit.sha[:12], bad[:12]
    told = _undoing(culprit, undoes, probe)
    if measured.verdict is Verdict.GOOD:
        status = VerificationStatus.CONFIRMED
        said = f"{told}{b} passes without {c}: reverting {c} on it makes {probe} pass, so {c} is what breaks it"
        steps: tuple[str, ...] = ()
    elif measured.verdict is Verdict.BAD:
        status = VerificationStatus.NOT_CONFIRMED
        failing = f" ({measured.signature})" if measured.signature else ""
        said = (
            f"{told}{b} still fails without {c}{failing}: a later commit between {c} and {b} breaks {probe} too, "
            f"or the search was misled by a flaky result; the runs suggested would tell which"
        )
        steps = _next_steps(prober, culprit, bad, good)
    else:
        status = VerificationStatus.UNTESTABLE
        why = f" ({measured.signature})" if measured.signature else ""
        said = f"{told}{probe} cannot judge {b} without {c}{why}, so the culprit is not checked"
        steps = ()
    return Verification(
        status, probe, culprit.sha, bad, said, measured.sha, measured.verdict, measured.reused, undoes, (), steps
    )


def _culprit_itself(
    prober: Prober, culprit: CommitInfo, bad: str, conflicts: tuple[str, ...], undoes: str | None
) -> Verification:
    """The check where C cannot be reverted on B: C against its parent, as stored by the search."""
    probe, c = prober.probe.name, culprit.sha[:12]
    parent = culprit.parents[0]
    trees = prober.record_commits([parent, culprit.sha])
    at_parent, at_culprit = prober.measure(parent, trees[parent]), prober.measure(culprit.sha, trees[culprit.sha])
    said = (
        f"{_undoing(culprit, undoes, probe)}{c} cannot be reverted cleanly on {bad[:12]} "
        f"(later commits changed {', '.join(conflicts)}); so {c} itself against its parent was checked: "
        f"{probe} is {at_parent.verdict.value} at {parent[:12]} and {at_culprit.verdict.value} at {c}"
    )
    return Verification(
        VerificationStatus.DOES_NOT_APPLY,
        probe,
        culprit.sha,
        bad,
        said,
        culprit.sha,
        at_culprit.verdict,
        at_parent.reused and at_culprit.reused,
        undoes,
        conflicts,
        (f"regtrack scan {c}..{bad[:12]} {probe_option(prober.probe)}",),
    )


def _undone_fix(prober: Prober, culprit: CommitInfo) -> str | None:
    """The fix ``culprit`` reverts: by its message, else by a stored pairing of its transition."""
    if culprit.reverts_sha is not None:
        return culprit.reverts_sha
    for t in prober.store.transitions(prober.repo_id, prober.target.name, prober.probe.name):
        if t.sha == culprit.sha and t.pair_kind == "reverts":
            return t.pairs_with
    return None


def _undoing(culprit: CommitInfo, undoes: str | None, probe: str) -> str:
    if undoes is None:
        return ""
    return f"{culprit.sha[:12]} reverts {undoes[:12]}, which fixed {probe}. "


def _next_steps(prober: Prober, culprit: CommitInfo, bad: str, good: str | None) -> tuple[str, ...]:
    """The commands whose runs tell a second breakage from a misled search."""
    c, option = culprit.sha[:12], probe_option(prober.probe)
    steps = [
        f"regtrack scan {c}..{bad[:12]} {option}",
        f"regtrack run {c}^ {c} {option} --fresh",
    ]
    if good is not None:
        steps.append(f"regtrack bisect --good {good[:12]} --bad {bad[:12]} {option} --strategy bayes --fresh")
    return tuple(steps)


def probe_option(probe: Probe) -> str:
    """The option that names the probe on a command line: ``--probe NAME``, or the ``--command``
    it was given as."""
    spec = spec_of(probe)
    if spec.source is Source.COMMAND and spec.name == adhoc_command_name(list(spec.command)):
        return f"--command {shlex.quote(shlex.join(spec.command))}"
    return f"--probe {probe.name}"


def verify_regression(prober: Prober, transition: TransitionRecord, culprit: CommitInfo, bad: str) -> Verification:
    """A scan's regression checked against ``bad``; not where other commits may hold it instead."""
    if len(transition.candidates) > 1:
        return skipped(prober.probe.name, culprit.sha, bad, HIDDEN.format(count=len(transition.candidates)))
    return verify_culprit(prober, culprit, bad, culprit.parents[0] if culprit.parents else None)


def scan_suspects(report: ScanReport) -> list[tuple[TransitionRecord, str]]:
    """Each regression of the scan with the bad end to check it against: the last commit measured
    bad before the probe's next transition (or the range's end)."""
    by_probe = {scan.probe: scan for scan in report.probes}
    index = {c.sha: i for i, c in enumerate(report.line)}
    found = []
    for t in report.transitions:
        if t.kind is TransitionKind.REGRESSION:
            scan = by_probe[t.probe]
            found.append((t, _last_bad(scan, report.line, index, t.sha)))
    return found


def _last_bad(scan: ProbeScan, line: Sequence[CommitInfo], index: dict[str, int], sha: str) -> str:
    start = index[sha]
    later = [index[t.sha] for t in scan.transitions if index[t.sha] > start]
    end = min(later, default=len(line))
    bad = [i for i in range(start, end) if scan.states[i] is State.BAD]
    return line[bad[-1]].sha if bad else sha
