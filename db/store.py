"""The store: the one way results get into and out of the database.

Every method runs in its own transaction (see ``db.engine``). Runs are never updated: each probe
execution is a row, and one attempt of a case is stored once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import ColumnElement, delete, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from db.chunks import chunked, keyed_filter, newest_first
from db.engine import added, commit_id_of, in_chunks, now, record_of
from db.input_store import InputStore
from db.models import (
    Claim,
    Commit,
    Environment,
    ProbeVersion,
    Repository,
    Run,
    TargetTree,
)
from db.sessions import SessionStore
from db.verifications import VerificationStore
from tracker.core.records import (
    CaseKey,
    ClaimState,
    CommitInfo,
    EnvironmentInfo,
    RunRecord,
    RunRow,
    StaleOwner,
    StoredRun,
)
from tracker.core.verdicts import Outcome


class Store(SessionStore, InputStore, VerificationStore):
    """Repositories, commits and their target trees, environments, probe versions, runs, claims;
    bisect sessions and tracking through ``SessionStore``; what runs read through ``InputStore``;
    culprits' checks through ``VerificationStore``."""

    def repository(self, path: Path) -> int:
        resolved = path.resolve()
        query = select(Repository.id).where(Repository.path == str(resolved))
        return self._id_or_added(query, lambda: Repository(path=str(resolved), name=resolved.name))

    def record_commits(self, repo_id: int, infos: list[CommitInfo]) -> None:
        """Insert new commits and refresh the metadata of known ones."""
        rows = {info.sha: _commit_values(repo_id, info) for info in infos}
        with self._writing() as session:
            known = _commit_ids(session, repo_id, list(rows))
            new = [row for sha, row in rows.items() if sha not in known]
            old = [{**row, "id": known[sha]} for sha, row in rows.items() if sha in known]
            if new:
                session.execute(insert(Commit), new)
            if old:
                session.execute(update(Commit), old)

    def record_tree(self, repo_id: int, sha: str, paths_key: str, tree_hash: str) -> None:
        self.record_trees(repo_id, paths_key, {sha: tree_hash})

    def record_trees(self, repo_id: int, paths_key: str, trees: Mapping[str, str]) -> None:
        """The tree hash of ``paths_key`` at each recorded commit, in one transaction (a range of a
        thousand commits is recorded by every bisect of it)."""
        with self._writing() as session:
            ids = _commit_ids(session, repo_id, list(trees))
            missing = [sha for sha in trees if sha not in ids]
            if missing:
                raise LookupError(
                    f"commit {missing[0]} of repository {repo_id} is not recorded; record_commits it first"
                )
            stored = _stored_trees(session, paths_key, [ids[sha] for sha in trees])
            rows = [{"commit_id": ids[sha], "paths_key": paths_key, "tree_hash": tree} for sha, tree in trees.items()]
            new = [row for row in rows if row["commit_id"] not in stored]
            changed = [
                row for row in rows if row["commit_id"] in stored and stored[row["commit_id"]] != row["tree_hash"]
            ]
            if new:
                session.execute(insert(TargetTree), new)
            if changed:
                session.execute(update(TargetTree), changed)

    def stored_trees(self, repo_id: int, paths_key: str, shas: Sequence[str]) -> dict[str, str]:
        """The recorded tree of ``paths_key`` at each of the commits that has one."""
        query = (
            select(Commit.sha, TargetTree.tree_hash)
            .join(TargetTree, TargetTree.commit_id == Commit.id)
            .where(Commit.repository_id == repo_id, TargetTree.paths_key == paths_key)
        )
        with self._reading() as session:
            return in_chunks(session, list(shas), lambda some: query.where(Commit.sha.in_(some)))

    def tree_hash(self, repo_id: int, sha: str, paths_key: str) -> str | None:
        query = (
            select(TargetTree.tree_hash)
            .join(Commit, TargetTree.commit_id == Commit.id)
            .where(Commit.repository_id == repo_id, Commit.sha == sha, TargetTree.paths_key == paths_key)
        )
        with self._reading() as session:
            return session.scalar(query)

    def environment(self, env: EnvironmentInfo) -> int:
        fingerprint = env.fingerprint
        query = select(Environment.id).where(Environment.fingerprint == fingerprint)
        return self._id_or_added(query, lambda: Environment(fingerprint=fingerprint, **asdict(env)))

    def probe_version(self, name: str, version: int, code_hash: str) -> int:
        key = {"name": name, "version": version, "code_hash": code_hash}
        return self._id_or_added(select(ProbeVersion.id).filter_by(**key), lambda: ProbeVersion(**key))

    def add_run(self, run: RunRecord, owner: str | None = None) -> int | None:
        """Store one run. With ``owner``, only while that owner still holds the attempt's claim,
        which is released in the same transaction; None when another process took it over."""
        values = asdict(run)
        del values["repo_id"], values["sha"]
        values["outcome"] = Outcome(run.outcome).value
        values["samples"] = run.samples or None
        values["conditions"] = run.conditions or None
        key = CaseKey(run.tree_hash, run.probe_id, run.environment_id, run.settings_key, run.case_id)
        with self._writing() as session:
            if owner is not None:
                claim = session.scalar(_claim_query(key, run.attempt))
                if claim is None or claim.owner != owner:
                    return None
                session.delete(claim)
            return added(session, Run(commit_id=commit_id_of(session, run.repo_id, run.sha), **values))

    def runs_for_tree(
        self, tree_hash: str, probe_id: int, environment_id: int, settings_keys: Sequence[str] | None = None
    ) -> list[StoredRun]:
        """Every stored run of this tree, probe version and environment (and, if given, one of the
        settings keys), whichever commit it was run at, oldest first."""
        query = (
            select(Run, Commit.sha)
            .join(Commit, Run.commit_id == Commit.id)
            .where(Run.tree_hash == tree_hash, Run.probe_id == probe_id, Run.environment_id == environment_id)
            .order_by(Run.id)
        )
        if settings_keys is not None:
            query = query.where(Run.settings_key.in_(sorted(set(settings_keys))))
        with self._reading() as session:
            return [StoredRun(**_stored_fields(run, sha)) for run, sha in session.execute(query)]

    def claim(
        self,
        key: CaseKey,
        attempt: int,
        owner: str,
        expires_at: datetime,
        stale: StaleOwner,
        session_id: int | None = None,
    ) -> ClaimState:
        """Take the attempt ``attempt`` of ``key`` for ``owner`` unless it is stored or a live
        process holds it; a stale holder's claim is taken over."""
        try:
            with self._writing() as session:
                if session.scalar(select(Run.id).where(*_key_where(Run, key), Run.attempt == attempt)) is not None:
                    return ClaimState.STORED
                held = session.scalar(_claim_query(key, attempt))
                if held is not None and not stale(held.owner, held.expires_at):
                    return ClaimState.HELD
                if held is not None:
                    session.delete(held)
                    session.flush()
                session.add(
                    Claim(
                        **asdict(key),
                        attempt=attempt,
                        session_id=session_id,
                        owner=owner,
                        claimed_at=now(),
                        expires_at=expires_at,
                    )
                )
        except IntegrityError:
            return ClaimState.HELD
        return ClaimState.CLAIMED

    def new_attempt(self, keys: Sequence[CaseKey], stale: StaleOwner) -> int:
        """The smallest attempt number of these cases under which nothing is stored and no live
        process holds a claim, so the numbers have no gaps: one that a killed process claimed and
        never stored is taken again. The claims on these cases of processes known to be gone are
        released."""
        with self._writing() as session:
            used = set(session.scalars(select(Run.attempt).where(*_keys_where(Run, keys)).distinct()))
            for claim in session.scalars(select(Claim).where(*_keys_where(Claim, keys))):
                if stale(claim.owner, claim.expires_at):
                    session.delete(claim)
                else:
                    used.add(claim.attempt)
        number = 1
        while number in used:
            number += 1
        return number

    def release_claims(self, owner: str, keys: Sequence[CaseKey] | None = None, attempt: int | None = None) -> None:
        """Give up the claims of ``owner`` whose runs it did not store (on an error or Ctrl-C):
        all of them, or those of ``keys`` at ``attempt``. A read-only store holds none."""
        if self.read_only:
            return
        where = [Claim.owner == owner]
        if keys is not None:
            where += [*_keys_where(Claim, keys), Claim.attempt == attempt]
        with self._writing() as session:
            session.execute(delete(Claim).where(*where))

    def attempt_outcomes(
        self, probe_name: str, environment_id: int, dtype: str
    ) -> list[tuple[str, str, int, str, Outcome]]:
        """Every stored case outcome of the probe (any version) in one environment at one dtype, as
        (tree, settings key, attempt, case, outcome): the history a probe's flake rate is read from."""
        query = (
            select(Run.tree_hash, Run.settings_key, Run.attempt, Run.case_id, Run.outcome)
            .join(ProbeVersion, Run.probe_id == ProbeVersion.id)
            .where(ProbeVersion.name == probe_name, Run.environment_id == environment_id, Run.dtype == dtype)
        )
        with self._reading() as session:
            return [
                (tree, key, attempt, case, Outcome(outcome))
                for tree, key, attempt, case, outcome in session.execute(query)
            ]

    def runs(
        self,
        repo_id: int | None = None,
        probe: str | None = None,
        shas: list[str] | None = None,
        outcome: Outcome | str | None = None,
        limit: int | None = None,
        trees: list[str] | None = None,
    ) -> list[RunRow]:
        """Stored runs, newest first, filtered by repository, probe name, outcome, and commits or
        target trees (a run at one commit holds for every commit with its tree); the commits or
        trees are bound a chunk at a time, so a range of any length can be asked about."""
        query = (
            select(Run, Commit, ProbeVersion, Environment)
            .join(Commit, Run.commit_id == Commit.id)
            .join(ProbeVersion, Run.probe_id == ProbeVersion.id)
            .join(Environment, Run.environment_id == Environment.id)
            .order_by(Run.id.desc())
            .limit(limit)
        )
        if repo_id is not None:
            query = query.where(Commit.repository_id == repo_id)
        if probe is not None:
            query = query.where(ProbeVersion.name == probe)
        if outcome is not None:
            query = query.where(Run.outcome == Outcome(outcome).value)
        name, keys = keyed_filter(shas, trees)
        column = {"sha": Commit.sha, "tree_hash": Run.tree_hash}.get(name)
        queries = (
            [query] if column is None or keys is None else [query.where(column.in_(chunk)) for chunk in chunked(keys)]
        )
        with self._reading() as session:
            found = [
                RunRow(
                    **_stored_fields(run, commit.sha),
                    probe_name=probe_row.name,
                    probe_version=probe_row.version,
                    subject=commit.subject,
                    pr_number=commit.pr_number,
                    fingerprint=env.fingerprint,
                    gpu_name=env.gpu_name,
                    dtype=run.dtype,
                )
                for chunk_query in queries
                for run, commit, probe_row, env in session.execute(chunk_query)
            ]
        return newest_first(found, limit)

    def probe_names(self, repo_id: int) -> list[str]:
        """The name of every probe with runs of this repository's commits, sorted."""
        query = (
            select(ProbeVersion.name)
            .join(Run, Run.probe_id == ProbeVersion.id)
            .join(Commit, Run.commit_id == Commit.id)
            .where(Commit.repository_id == repo_id)
            .distinct()
            .order_by(ProbeVersion.name)
        )
        with self._reading() as session:
            return list(session.scalars(query))

    def commit(self, repo_id: int, sha: str) -> CommitInfo | None:
        with self._reading() as session:
            row = session.scalar(select(Commit).where(Commit.repository_id == repo_id, Commit.sha == sha))
            if row is None:
                return None
            return record_of(CommitInfo, row, parents=tuple(row.parents.split()))

    def environments(self, repo_id: int) -> list[tuple[str, EnvironmentInfo]]:
        """The fingerprint and description of every environment that ran this repository's commits,
        in the order they were first stored."""
        used = (
            select(Run.environment_id).join(Commit, Run.commit_id == Commit.id).where(Commit.repository_id == repo_id)
        )
        query = select(Environment).where(Environment.id.in_(used)).order_by(Environment.id)
        with self._reading() as session:
            return [(env.fingerprint, record_of(EnvironmentInfo, env)) for env in session.scalars(query)]


def upgrade(url: str | None = None, *, busy_timeout_ms: int = 5000) -> None:
    """Migrate the database at ``url`` (default: ``db.paths.default_db_url()``) to the newest schema."""
    Store.open(url, busy_timeout_ms=busy_timeout_ms).close()


def _commit_values(repo_id: int, info: CommitInfo) -> dict[str, Any]:
    return {**asdict(info), "repository_id": repo_id, "parents": " ".join(info.parents)}


def _commit_ids(session: Session, repo_id: int, shas: list[str]) -> dict[str, int]:
    return in_chunks(
        session,
        shas,
        lambda some: select(Commit.sha, Commit.id).where(Commit.repository_id == repo_id, Commit.sha.in_(some)),
    )


def _stored_trees(session: Session, paths_key: str, commit_ids: list[int]) -> dict[int, str]:
    return in_chunks(
        session,
        commit_ids,
        lambda some: select(TargetTree.commit_id, TargetTree.tree_hash).where(
            TargetTree.paths_key == paths_key, TargetTree.commit_id.in_(some)
        ),
    )


def _stored_fields(run: Run, sha: str) -> dict[str, Any]:
    return {
        "id": run.id,
        "sha": sha,
        "tree_hash": run.tree_hash,
        "case_id": run.case_id,
        "settings_key": run.settings_key,
        "outcome": Outcome(run.outcome),
        "metrics": run.metrics,
        "signature": run.signature,
        "duration_s": run.duration_s,
        "started_at": run.started_at,
        "attempt": run.attempt,
        "seed": run.seed,
        "trigger": run.trigger,
        "session_id": run.session_id,
        "detail": run.detail,
        "samples": run.samples or {},
        "conditions": run.conditions or {},
    }


def _key_where(table: type[Run] | type[Claim], key: CaseKey) -> list[ColumnElement[bool]]:
    return [getattr(table, name) == value for name, value in asdict(key).items()]


def _keys_where(table: type[Run] | type[Claim], keys: Sequence[CaseKey]) -> list[ColumnElement[bool]]:
    """The cases of one tree measured one way (one probe, environment) under any of their settings."""
    first = keys[0]
    return [
        table.tree_hash == first.tree_hash,
        table.probe_id == first.probe_id,
        table.environment_id == first.environment_id,
        table.settings_key.in_(sorted({k.settings_key for k in keys})),
        table.case_id.in_(sorted({k.case_id for k in keys})),
    ]


def _claim_query(key: CaseKey, attempt: int) -> Any:
    return select(Claim).where(*_key_where(Claim, key), Claim.attempt == attempt)
