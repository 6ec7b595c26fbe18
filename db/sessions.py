"""Bisect sessions and their steps, the scheduled job's place on each branch, and transitions."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session

from db.engine import Database, added, now, record_of
from db.models import (
    BisectSession,
    BisectStep,
    ProbeVersion,
    Run,
    TrackState,
    TransitionRow,
)
from tracker.core.records import (
    FINISHED,
    PairKind,
    SessionRow,
    SessionStatus,
    StaleOwner,
    StepRow,
    StepVerdict,
    TransitionKind,
    TransitionRecord,
)

_FAR_FUTURE = datetime.max.replace(tzinfo=UTC)
"""A session's driver has no expiry: it is stale only when its process is known to be gone."""


class SessionStore(Database):
    def start_session(
        self,
        repo_id: int,
        target: str,
        probe_id: int,
        good_sha: str,
        bad_sha: str,
        strategy: str,
        options: dict[str, Any] | None = None,
        driver: str | None = None,
    ) -> int:
        row = BisectSession(
            repository_id=repo_id,
            target=target,
            probe_id=probe_id,
            good_sha=good_sha,
            bad_sha=bad_sha,
            strategy=strategy,
            options=options,
            status="running",
            driver=driver,
            started_at=now(),
        )
        with self._writing() as session:
            return added(session, row)

    def take_session(self, session_id: int, driver: str, stale: StaleOwner) -> str | None:
        """Make ``driver`` the one process driving the unfinished session; else who holds it: a
        live driver (a stale one is replaced), or ``FINISHED``."""
        with self._writing() as session:
            row = _bisect_session(session, session_id)
            if row.status != "running":
                return FINISHED
            if row.driver not in (None, driver) and not stale(row.driver, _FAR_FUTURE):
                return row.driver
            row.driver = driver
            return None

    def session_attempts(self, session_id: int) -> int:
        """How many attempts (a tree measured once, whatever its cases) the session executed."""
        query = select(func.count()).select_from(
            select(Run.tree_hash, Run.attempt)
            .where(Run.session_id == session_id, Run.reused_from_id.is_(None))
            .distinct()
            .subquery()
        )
        with self._reading() as session:
            return session.scalar(query) or 0

    def add_step(
        self,
        session_id: int,
        sha: str,
        verdict: StepVerdict,
        reused: bool,
        attempt: int | None = None,
        round: int | None = None,
    ) -> None:
        with self._writing() as session:
            position = session.scalar(select(func.count()).where(BisectStep.session_id == session_id))
            session.add(
                BisectStep(
                    session_id=session_id,
                    position=position,
                    sha=sha,
                    verdict=verdict,
                    reused=reused,
                    attempt=attempt,
                    round=round,
                    created_at=now(),
                )
            )

    def steps(self, session_id: int) -> list[StepRow]:
        query = select(BisectStep).where(BisectStep.session_id == session_id).order_by(BisectStep.position)
        with self._reading() as session:
            return [record_of(StepRow, step) for step in session.scalars(query)]

    def finish_session(self, session_id: int, status: SessionStatus, result: dict[str, Any]) -> None:
        with self._writing() as session:
            row = _bisect_session(session, session_id)
            row.status = status
            row.finished_at = now()
            row.result = result
            row.driver = None

    def session(self, session_id: int) -> SessionRow:
        with self._reading() as session:
            row = _bisect_session(session, session_id)
            probe = session.get_one(ProbeVersion, row.probe_id)
            return _session_row(row, probe.name)

    def open_sessions(self, repo_id: int, target: str, probe_id: int) -> list[SessionRow]:
        """Unfinished bisect sessions, newest first."""
        with self._reading() as session:
            return _session_rows(
                session,
                BisectSession.repository_id == repo_id,
                BisectSession.target == target,
                BisectSession.probe_id == probe_id,
                BisectSession.status == "running",
                newest_first=True,
            )

    def sessions(self, repo_id: int, target: str | None = None) -> list[SessionRow]:
        """Every bisect session of the repository (of one target, if given), oldest first."""
        where = [BisectSession.repository_id == repo_id]
        if target is not None:
            where.append(BisectSession.target == target)
        with self._reading() as session:
            return _session_rows(session, *where)

    def last_tracked(self, repo_id: int, target: str, branch: str) -> str | None:
        with self._reading() as session:
            return session.scalar(
                select(TrackState.last_sha).where(
                    TrackState.repository_id == repo_id, TrackState.target == target, TrackState.branch == branch
                )
            )

    def set_tracked(self, repo_id: int, target: str, branch: str, sha: str) -> None:
        with self._writing() as session:
            session.merge(
                TrackState(repository_id=repo_id, target=target, branch=branch, last_sha=sha, updated_at=now())
            )

    def record_transitions(
        self, repo_id: int, target: str, transitions: list[TransitionRecord]
    ) -> list[TransitionRecord]:
        """Store the transitions not stored before; returns those that are new."""
        new = []
        with self._writing() as session:
            for t in transitions:
                exists = session.scalar(
                    select(TransitionRow.id).where(
                        TransitionRow.repository_id == repo_id,
                        TransitionRow.target == target,
                        TransitionRow.probe == t.probe,
                        TransitionRow.sha == t.sha,
                        TransitionRow.kind == t.kind,
                    )
                )
                if exists is None:
                    found_at = now()
                    values = {**asdict(t), "candidates": list(t.candidates), "found_at": found_at}
                    session.add(TransitionRow(repository_id=repo_id, target=target, **values))
                    new.append(TransitionRecord(**{**asdict(t), "found_at": found_at}))
        return new

    def transitions(self, repo_id: int, target: str | None = None, probe: str | None = None) -> list[TransitionRecord]:
        """Stored transitions, oldest commit first."""
        query = select(TransitionRow).where(TransitionRow.repository_id == repo_id)
        if target is not None:
            query = query.where(TransitionRow.target == target)
        if probe is not None:
            query = query.where(TransitionRow.probe == probe)
        with self._reading() as session:
            rows = session.scalars(query.order_by(TransitionRow.authored_at, TransitionRow.id)).all()
            return [
                TransitionRecord(
                    r.probe,
                    r.sha,
                    TransitionKind(r.kind),
                    r.pairs_with,
                    cast("PairKind | None", r.pair_kind),
                    tuple(r.candidates),
                    r.authored_at,
                    r.trigger,
                    r.found_at,
                )
                for r in rows
            ]


def _bisect_session(session: Session, session_id: int) -> BisectSession:
    row = session.get(BisectSession, session_id)
    if row is None:
        raise LookupError(f"no bisect session {session_id}")
    return row


def _session_rows(session: Session, *where: ColumnElement[bool], newest_first: bool = False) -> list[SessionRow]:
    query = (
        select(BisectSession, ProbeVersion.name)
        .join(ProbeVersion, BisectSession.probe_id == ProbeVersion.id)
        .where(*where)
        .order_by(BisectSession.id.desc() if newest_first else BisectSession.id)
    )
    return [_session_row(row, name) for row, name in session.execute(query)]


def _session_row(row: BisectSession, probe_name: str) -> SessionRow:
    return record_of(SessionRow, row, repo_id=row.repository_id, probe_name=probe_name)
