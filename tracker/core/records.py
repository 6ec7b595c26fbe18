"""The records every layer shares: commits, environments, runs, bisect sessions and steps,
transitions and stretches, claims, and the commit-subject patterns. Each is declared here once;
the store maps them to rows, the scan and the report use them as they are."""

from __future__ import annotations

import enum
import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Literal

from tracker.core.verdicts import Outcome, State

StepVerdict = Literal["good", "bad", "skip"]
FINISHED = "finished"
"""``Store.take_session``'s answer for a session that another process finished meanwhile."""
SessionStatus = Literal["running", "done", "failed"]


PR_SUFFIX = re.compile(r"\s*\(#(\d+)\)\s*$")
"""A squash merge's pull request at the end of a subject: ``Fix x (#12)``."""
REVERT_SUBJECT = re.compile(r'^Revert "(?P<subject>.*)"')
"""The subject GitHub gives a revert: ``Revert "<subject of the reverted commit>"``."""


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    parents: tuple[str, ...]
    subject: str
    author: str
    authored_at: datetime
    pr_number: int | None = None
    reverts_sha: str | None = None


@dataclass(frozen=True)
class EnvironmentInfo:
    device: str
    gpu_name: str | None = None
    compute_capability: str | None = None
    driver: str | None = None
    cuda: str | None = None
    torch: str | None = None
    flashinfer: str | None = None
    python: str | None = None
    host: str | None = None
    facts: Mapping[str, str] = field(default_factory=dict)
    """What the target declares about its environment (its config's ``facts``)."""

    @property
    def fingerprint(self) -> str:
        """Identifies the software and hardware stack and the declared facts; machines with the same
        stack share it. No facts leaves them out, so fingerprints from before facts stay the same."""
        fields = {name: value for name, value in asdict(self).items() if name != "host"}
        if not self.facts:
            del fields["facts"]
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class CaseKey:
    """One case of one tree, measured one way: stored runs with this key answer for each other."""

    tree_hash: str
    probe_id: int
    environment_id: int
    settings_key: str
    case_id: str


class ClaimState(str, enum.Enum):
    CLAIMED = "claimed"
    """This process now owns the attempt: it runs the case and stores the run."""
    STORED = "stored"
    """The attempt is stored already."""
    HELD = "held"
    """Another live process owns it: wait for its run."""


StaleOwner = Callable[[str, datetime], bool]
"""Whether a claim's (owner, expires_at) belongs to a process that is gone."""


@dataclass(frozen=True)
class RunRecord:
    repo_id: int
    sha: str
    tree_hash: str
    environment_id: int
    probe_id: int
    case_id: str
    settings_key: str
    dtype: str | None
    outcome: Outcome
    metrics: dict[str, Any]
    signature: str | None
    detail: str
    duration_s: float
    started_at: datetime
    attempt: int
    seed: int
    trigger: str
    session_id: int | None = None
    input_set_id: int | None = None
    """What the case read of its revision (``Store.input_set``); None: reused by tree only."""
    samples: dict[str, list[float]] = field(default_factory=dict)
    """A metric probe's samples by metric, every one."""
    conditions: dict[str, str] = field(default_factory=dict)
    """What moved a metric probe's timings as it ran: CPU governor, GPU clocks, power limit."""


@dataclass(frozen=True)
class InputRun:
    """A stored run that recorded what it read: enough to tell whether it holds at another revision."""

    tree_hash: str
    case_id: str
    settings_key: str
    attempt: int
    input_set_id: int
    started_at: datetime


@dataclass(frozen=True)
class StoredRun:
    id: int
    sha: str
    tree_hash: str
    case_id: str
    settings_key: str
    outcome: Outcome
    metrics: dict[str, Any]
    signature: str | None
    duration_s: float
    started_at: datetime
    attempt: int
    seed: int
    trigger: str
    session_id: int | None
    detail: str
    """What the probe said beyond its signature: a command's kept output."""
    samples: dict[str, list[float]]
    """A metric probe's samples by metric, every one; empty for other probes."""
    conditions: dict[str, str]
    """What moved a metric probe's timings as it ran; empty for other probes."""


@dataclass(frozen=True)
class RunRow(StoredRun):
    probe_name: str
    probe_version: int
    subject: str
    pr_number: int | None
    fingerprint: str
    gpu_name: str | None
    dtype: str | None = None
    """The probe's dtype (None for runs stored before the store recorded it)."""


@dataclass(frozen=True)
class SessionRow:
    id: int
    repo_id: int
    target: str
    probe_id: int
    probe_name: str
    good_sha: str
    bad_sha: str
    strategy: str
    options: dict[str, Any] | None
    status: str
    driver: str | None
    started_at: datetime
    finished_at: datetime | None
    result: dict[str, Any] | None


@dataclass(frozen=True)
class StepRow:
    position: int
    sha: str
    verdict: StepVerdict
    reused: bool
    created_at: datetime
    attempt: int | None = None
    round: int | None = None


class TransitionKind(enum.StrEnum):
    """Which way a probe's state changes at a transition; stored and printed as its value."""

    REGRESSION = "regression"
    FIX = "fix"


PairKind = Literal["reverts", "relands"]
StretchKind = Literal["untestable", "flaky"]


def stretch_kind(state: State) -> StretchKind:
    """What a stretch of untestable (``SKIP``) or flaky revisions is called."""
    return "untestable" if state is State.SKIP else "flaky"


@dataclass(frozen=True)
class TransitionRecord:
    """A transition of a probe at a commit, as the scan finds it and the store and report keep it.

    ``sha`` is the first commit in the new state; ``candidates`` lists the commits it may be when
    untestable or flaky commits hide it (``(sha,)`` when it is exact). ``pairs_with`` is the commit
    it reverts or re-lands (``pair_kind``); ``trigger`` says what found it (``scan`` or ``track``)."""

    probe: str
    sha: str
    kind: TransitionKind
    pairs_with: str | None
    pair_kind: PairKind | None
    candidates: tuple[str, ...]
    authored_at: datetime
    trigger: str
    found_at: datetime | None = None


@dataclass(frozen=True)
class StretchRecord:
    """Commits ``first`` .. ``last`` of a line where a probe is untestable or flaky: never a
    transition themselves, though one may hide among them."""

    probe: str
    kind: StretchKind
    first: str
    last: str
