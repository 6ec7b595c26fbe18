"""A regression as a paste-ready GitHub issue: what it gathers (``RegressionIssue``) and its
GitHub-flavoured markdown body (``issue_markdown``).

Every string that comes from the repository or a probe (subjects, authors, signatures, case names)
is escaped where it could break the structure: GitHub renders HTML in markdown, ``|`` ends a
table cell, and backticks, ``*`` or ``[`` start inline markup. Host names are left out of the
environment: an issue is often public.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tracker.core.exits import ExitStatus
from tracker.core.records import CommitInfo, EnvironmentInfo, PairKind
from tracker.core.verdicts import BAD_OUTCOMES, Outcome, Verdict

if TYPE_CHECKING:
    from tracker.core.verification import Verification

GITHUB_REMOTE = re.compile(
    r"^(?:(?:https?|git)://(?:[^@/]+@)?github\.com/|(?:ssh://)?git@github\.com[:/])"
    r"(?P<owner>[\w.-]+)/(?P<name>[\w.-]+?)(?:\.git)?/?$"
)
MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|~&])")
DEFAULT_DTYPE = {"cpu": "float32", "cuda": "bfloat16"}
SEPARATOR = "\n\n---\n\n"
"""Between the bodies of several issues printed together: a thematic break."""


@dataclass(frozen=True)
class CaseAtCommit:
    """The newest stored run of one case of a probe at one commit, in one environment and dtype,
    with how many of its attempts there failed."""

    probe: str
    case: str
    fingerprint: str
    dtype: str | None
    outcome: Outcome
    signature: str | None
    metrics: Mapping[str, float]
    attempts: int
    failed: int

    @property
    def key(self) -> tuple[str, str, str, str | None]:
        return self.probe, self.case, self.fingerprint, self.dtype


@dataclass(frozen=True)
class RegressionIssue:
    """What an issue about one regression of ``probe`` at ``culprit`` says.

    ``at_culprit`` holds every probe's cases at the culprit, ``at_parent`` the regressed probe's at
    its first parent; ``paired`` is the commit it reverts or re-lands (``pair_kind``), ``fixed_by``
    the later fix of the probe when it is no longer open; ``command`` the probe's command line when
    it is a command and known (``git bisect run`` can run it as it is); ``ad_hoc`` tells a
    ``--command`` probe, which regtrack names after its command line, from one it knows by name."""

    probe: str
    culprit: CommitInfo
    parent: CommitInfo | None
    candidates: tuple[str, ...]
    at_culprit: tuple[CaseAtCommit, ...]
    at_parent: tuple[CaseAtCommit, ...]
    environments: Mapping[str, EnvironmentInfo]
    remote_url: str | None = None
    verification: Verification | None = None
    pair_kind: PairKind | None = None
    paired: CommitInfo | None = None
    fixed_by: CommitInfo | None = None
    command: tuple[str, ...] | None = None
    ad_hoc: bool = False

    @property
    def file_name(self) -> str:
        """``regression-<probe>-<short sha>.md``, safe as a file name whatever the probe is called."""
        probe = re.sub(r"[^\w.-]+", "-", self.probe).strip("-.") or "probe"
        return f"regression-{probe}-{self.culprit.sha[:12]}.md"


def issue_markdown(issue: RegressionIssue) -> str:
    """The issue's body: title, culprit, failures, metrics, verification, history, environment, reproduce."""
    sections = [
        [f"# {code(issue.probe)} regressed by {short(issue.culprit.sha)}: {text(issue.culprit.subject)}"],
        _culprit(issue),
        _failures(issue),
        _metrics(issue),
        _verification(issue),
        _history(issue),
        _environments(issue),
        _reproduce(issue),
    ]
    return "\n\n".join("\n".join(lines) for lines in sections if lines) + "\n"


def issues_markdown(issues: Sequence[RegressionIssue]) -> str:
    """Several bodies in one text, separated by a thematic break."""
    return SEPARATOR.join(issue_markdown(issue).rstrip("\n") for issue in issues) + "\n"


def github_web_url(remote_url: str | None) -> str | None:
    """``https://github.com/<owner>/<repo>`` for a GitHub SSH, HTTPS or git URL; None for any other."""
    match = GITHUB_REMOTE.match(remote_url or "")
    return f"https://github.com/{match['owner']}/{match['name']}" if match else None


def text(value: str) -> str:
    """``value`` as literal inline text: markup characters backslash-escaped, on one line."""
    return MARKDOWN_SPECIAL.sub(r"\\\1", " ".join(value.split()))


def code(value: str, cell: bool = False) -> str:
    """``value`` as a code span on one line, fenced by more backticks than it holds in a row
    (CommonMark's rule); in a table ``cell``, with ``|`` escaped (GitHub's table rule)."""
    value = " ".join(value.split())
    value = value.replace("|", "\\|") if cell else value
    fence = "`" * (max(map(len, re.findall("`+", value)), default=0) + 1)
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def short(sha: str) -> str:
    return f"`{sha[:12]}`"


def _commit_ref(commit: CommitInfo, web: str | None) -> str:
    return f"[{short(commit.sha)}]({web}/commit/{commit.sha})" if web else short(commit.sha)


def _pr_ref(number: int, web: str | None) -> str:
    return f"[#{number}]({web}/pull/{number})" if web else f"#{number}"


def _culprit(issue: RegressionIssue) -> list[str]:
    web = github_web_url(issue.remote_url)
    c = issue.culprit
    lines = [
        "## Culprit",
        "",
        f"- commit: {_commit_ref(c, web)}",
        f"- subject: {text(c.subject)}",
        f"- pull request: {_pr_ref(c.pr_number, web) if c.pr_number else 'none named in the subject'}",
        f"- author: {text(c.author)}",
        f"- date: {c.authored_at.isoformat()}",
    ]
    if issue.parent is not None:
        lines.append(f"- parent (last good): {_commit_ref(issue.parent, web)} {text(issue.parent.subject)}")
    if len(issue.candidates) > 1:
        others = ", ".join(short(sha) for sha in issue.candidates)
        lines.append(f"- not pinned down: it is one of {len(issue.candidates)} commits ({others})")
    return lines


def _failures(issue: RegressionIssue) -> list[str]:
    failing = [r for r in issue.at_culprit if r.outcome in BAD_OUTCOMES]
    if not failing:
        return ["## Failures at the culprit", "", "No failing run of the culprit is stored."]
    lines = [
        "## Failures at the culprit",
        "",
        "| probe | case | environment | outcome | attempts failed | signature |",
        "|---|---|---|---|---|---|",
    ]
    for r in failing:
        where = _environment_label(r, issue.environments)
        lines.append(
            f"| {code(r.probe, True)} | {code(r.case, True)} | {where} | {r.outcome.value} | {r.failed}/{r.attempts} "
            f"| {code(r.signature, True) if r.signature else ''} |"
        )
    return lines


def _metrics(issue: RegressionIssue) -> list[str]:
    """Per case of the regressed probe: its outcome and every stored metric at the parent and the culprit."""
    culprit = {r.key: r for r in issue.at_culprit if r.probe == issue.probe}
    parent = {r.key: r for r in issue.at_parent}
    keys = sorted(set(culprit) | set(parent), key=lambda k: (k[1], k[2], k[3] or ""))
    if not keys:
        return []
    parent_label = short(issue.parent.sha) if issue.parent else "parent"
    lines = [
        f"## Metrics of {code(issue.probe)}",
        "",
        f"| case | metric | parent {parent_label} | culprit {short(issue.culprit.sha)} |",
        "|---|---|---:|---:|",
    ]
    for key in keys:
        before, after = parent.get(key), culprit.get(key)
        label = code(key[1], True) + _environment_suffix(key, issue)
        lines.append(f"| {label} | outcome | {_outcome(before)} | {_outcome(after)} |")
        names = sorted({*(before.metrics if before else {}), *(after.metrics if after else {})})
        for name in names:
            lines.append(f"| {label} | {code(name, True)} | {_value(before, name)} | {_value(after, name)} |")
    return lines


def _outcome(result: CaseAtCommit | None) -> str:
    return result.outcome.value if result else "not run"


def _value(result: CaseAtCommit | None, name: str) -> str:
    if result is None or name not in result.metrics:
        return "—"
    return f"{result.metrics[name]:.4g}"


def _environment_suffix(key: tuple[str, str, str, str | None], issue: RegressionIssue) -> str:
    """Only where runs of several environments or dtypes are shown: which one the row is."""
    shown = {(r.fingerprint, r.dtype) for r in (*issue.at_culprit, *issue.at_parent) if r.probe == issue.probe}
    if len(shown) < 2:
        return ""
    info = issue.environments.get(key[2])
    return f" ({text(_device_name(info))}{', ' + text(key[3]) if key[3] else ''})"


def _verification(issue: RegressionIssue) -> list[str]:
    v = issue.verification
    if v is None:
        return ["## Verification", "", "Not verified: no check of this culprit is stored."]
    lines = ["## Verification", "", f"**{text(v.status.value)}**: {text(v.explanation)}"]
    if v.checked:
        verdict = f", verdict {v.verdict.value}" if v.verdict is not None else ""
        lines.append(f"\nChecked {short(v.checked)}{verdict}{' (stored result reused)' if v.reused else ''}.")
    if v.undoes and (issue.paired is None or issue.paired.sha != v.undoes):
        lines.append(f"\nThe culprit undoes the fix {short(v.undoes)}.")
    if v.conflicts:
        lines.append("\nThe revert does not apply to: " + ", ".join(text(path) for path in v.conflicts) + ".")
    if v.next_steps:
        lines += ["", "Runs that would tell more:", "", *_code_block(v.next_steps)]
    return lines


def _history(issue: RegressionIssue) -> list[str]:
    """The revert / re-land context of the culprit, and its fix when it is no longer open."""
    web = github_web_url(issue.remote_url)
    lines = []
    if issue.paired is not None and issue.pair_kind == "reverts":
        lines.append(
            f"This re-introduces what {_commit_ref(issue.paired, web)} fixed: it reverts {text(issue.paired.subject)}."
        )
    elif issue.paired is not None:
        lines.append(f"This re-lands {_commit_ref(issue.paired, web)} {text(issue.paired.subject)}.")
    if issue.fixed_by is not None:
        lines.append(f"Fixed since by {_commit_ref(issue.fixed_by, web)} {text(issue.fixed_by.subject)}.")
    return ["## History", "", *lines] if lines else []


def _environments(issue: RegressionIssue) -> list[str]:
    used = dict.fromkeys((r.fingerprint, r.dtype) for r in (*issue.at_culprit, *issue.at_parent))
    if not used:
        return []
    lines = ["## Environment", ""]
    for fingerprint, dtype in used:
        info = issue.environments.get(fingerprint)
        facts = _environment_facts(info) + ([f"dtype {dtype}"] if dtype else [])
        lines.append(f"- {text(', '.join(facts))} (fingerprint `{fingerprint}`)")
    return lines


def _environment_facts(info: EnvironmentInfo | None) -> list[str]:
    if info is None:
        return ["not stored"]
    named = [
        ("compute capability", info.compute_capability),
        ("driver", info.driver),
        ("CUDA", info.cuda),
        ("torch", info.torch),
        ("FlashInfer", info.flashinfer),
        ("Python", info.python),
    ]
    facts = [_device_name(info), *(f"{name} {value}" for name, value in named if value)]
    return facts + [f"{name} {value}" for name, value in sorted(info.facts.items())]


def _device_name(info: EnvironmentInfo | None) -> str:
    if info is None:
        return "unknown"
    return info.gpu_name or info.device


def _environment_label(result: CaseAtCommit, environments: Mapping[str, EnvironmentInfo]) -> str:
    name = _device_name(environments.get(result.fingerprint))
    return text(name + (f", {result.dtype}" if result.dtype else ""))


def _reproduce(issue: RegressionIssue) -> list[str]:
    culprit, parent = issue.culprit.sha[:12], f"{issue.culprit.sha[:12]}^"
    lines = ["## Reproduce", ""]
    if issue.ad_hoc and issue.command is None:
        unkept = f"`regtrack run {parent} {culprit} --command CMD`"
        return [*lines, f"regtrack keeps no copy of this `--command` probe's command line; give it to {unkept}."]
    chosen = ["--command", shlex.join(issue.command)] if issue.ad_hoc and issue.command else ["--probe", issue.probe]
    runs = [shlex.join(["regtrack", "run", parent, culprit, *chosen, *device]) for device in _device_options(issue)]
    check = shlex.join(_git_check(issue))
    by_hand = [
        f'git checkout --quiet --detach {shlex.quote(parent)} && {check}; echo "parent: exit $? (0 is good)"',
        f'git checkout --quiet --detach {culprit} && {check}; echo "culprit: exit $? (1-127 but 125 is bad)"',
        "git checkout --quiet @{-2}",
    ]
    wider = code(f"git bisect start {culprit} G && git bisect run {check}")
    lines += ["With regtrack (the parent passes, the culprit fails):", "", *_code_block(runs), ""]
    in_turn = "With git, the same two commits checked out in turn, then back to where you were:"
    lines += [in_turn, "", *_code_block(by_hand), ""]
    return [*lines, f"To bisect from an older commit G where it passes: {wider}, then `git bisect reset`."]


def _device_options(issue: RegressionIssue) -> list[list[str]]:
    """The ``--device``/``--dtype`` options of each environment the culprit's failures came from."""
    failing = [r for r in issue.at_culprit if r.probe == issue.probe and r.outcome in BAD_OUTCOMES]
    options: dict[tuple[str, ...], None] = {}
    for r in failing or [r for r in issue.at_culprit if r.probe == issue.probe] or [None]:
        info = issue.environments.get(r.fingerprint) if r else None
        device = "cuda" if info is not None and info.device.startswith("cuda") else "cpu"
        chosen = ["--device", "cuda"] if device == "cuda" else []
        if r is not None and r.dtype and r.dtype != DEFAULT_DTYPE[device]:
            chosen += ["--dtype", r.dtype]
        options[tuple(chosen)] = None
    return [list(option) for option in options]


def _git_check(issue: RegressionIssue) -> list[str]:
    """The check a git user runs at the checked-out commit, fit for ``git bisect run``: a command
    probe's own line (it keeps git bisect's exit codes), else ``regtrack run HEAD`` with its exit
    statuses mapped: 3 (no probe could judge) to 125 (skip), 2 (bad usage) to 128 (stop the
    bisect); 0 and 1 mean what git bisect reads them as."""
    if issue.command is not None:
        return list(issue.command)
    run = shlex.join(["regtrack", "run", "HEAD", "--probe", issue.probe, *_device_options(issue)[0]])
    untestable, usage, skip = int(ExitStatus.UNJUDGED), int(ExitStatus.USAGE), Verdict.SKIP.exit_code
    script = f'{run}; s=$?; [ "$s" -eq {untestable} ] && exit {skip}; [ "$s" -eq {usage} ] && exit 128; exit "$s"'
    return ["sh", "-c", script]


def _code_block(lines: Sequence[str]) -> list[str]:
    """A fenced block longer than any run of backticks in ``lines``."""
    longest = max((len(run) for line in lines for run in re.findall("`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}sh", *lines, fence]
