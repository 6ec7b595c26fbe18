"""When a stored result may stand for a new one: the settings key, and attempts.

A stored run answers for a new request only when nothing it depends on changed: the tree of the
target's paths, the probe version and the environment (the store's own keys), and the settings
digested here: the dtype, the seed policy, how the snapshot was made testable (the target's setup
command and import roots) and the case's parameters. A fixed ``--seed S`` is a policy of its own:
its runs answer only for ``--seed S``. A target with no setup and the default import root digests
as before either existed, so results stored then stay reusable.

An attempt is one measurement of a tree: every case of the probe run once under one attempt
number. An attempt missing cases (its process was killed) is incomplete: it judges nothing until
it is completed, and it is never mixed with another attempt's cases.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from probes.api import DEFAULT_IMPORT_ROOTS
from tracker.core.records import StoredRun
from tracker.core.verdicts import Verdict, verdict_of


def seed_policy(seed: int | None) -> str:
    return "fresh" if seed is None else f"fixed:{seed}"


def settings_key(
    dtype: str,
    seed: int | None,
    params: Mapping[str, Any],
    setup: Sequence[str] | None = None,
    import_roots: Sequence[str] = DEFAULT_IMPORT_ROOTS,
) -> str:
    """What, besides tree, probe version and environment, a case's result depends on: the digest
    of the settings every case of an attempt shares (dtype, seed policy, setup command, import
    roots), a dash, the digest of the case's parameters."""
    shared: dict[str, Any] = {"dtype": dtype, "seed": seed_policy(seed)}
    if setup is not None:
        shared["setup"] = list(setup)
    if tuple(import_roots) != DEFAULT_IMPORT_ROOTS:
        shared["import_roots"] = list(import_roots)
    return f"{_digest(shared)}-{_digest(params)}"


def attempt_settings(key: str) -> str:
    """The part of a settings key that all cases of one attempt share ("legacy" for rows stored
    before settings were recorded)."""
    return key.partition("-")[0]


def _digest(value: object) -> str:
    text = json.dumps(value, sort_keys=True, default=repr, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Attempt:
    number: int
    runs: Mapping[str, StoredRun]
    """The stored run of each case that has one."""

    def complete(self, case_ids: Sequence[str]) -> bool:
        return all(case_id in self.runs for case_id in case_ids)

    def verdict(self) -> Verdict:
        return verdict_of(run.outcome for run in self.runs.values())

    def sessions(self) -> set[int]:
        return {run.session_id for run in self.runs.values() if run.session_id is not None}


def attempts_of(runs: Iterable[StoredRun], keys: Mapping[str, str]) -> list[Attempt]:
    """The attempts in ``runs`` under ``keys`` (case id -> settings key), oldest first; runs of
    other cases or other settings are left out."""
    grouped: dict[int, dict[str, StoredRun]] = {}
    for run in runs:
        if keys.get(run.case_id) == run.settings_key:
            grouped.setdefault(run.attempt, {})[run.case_id] = run
    return [Attempt(number, grouped[number]) for number in sorted(grouped)]


def complete_verdicts(attempts: Iterable[Attempt], case_ids: Sequence[str]) -> list[Verdict]:
    """The verdict of each complete attempt, oldest first."""
    return [attempt.verdict() for attempt in attempts if attempt.complete(case_ids)]
