"""Verifications of culprits: each bisect's or scan's named commit checked by measuring the bad end
with its change undone (``tracker.core.verification``), kept per culprit and bad end, newest wins."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from db.engine import Database, now
from db.models import BisectSession, VerificationRow
from tracker.core.verification import Verification


class VerificationStore(Database):
    def record_verification(self, repo_id: int, target: str, verification: Verification) -> None:
        """Keep ``verification``, in place of an earlier check of the same culprit and bad end."""
        key = {
            "repository_id": repo_id,
            "target": target,
            "probe": verification.probe,
            "culprit": verification.culprit,
            "bad": verification.bad,
        }
        values: dict[str, Any] = {
            "status": verification.status.value,
            "record": verification.to_json(),
            "verified_at": now(),
        }
        with self._writing() as session:
            row = session.scalar(select(VerificationRow).filter_by(**key))
            if row is None:
                session.add(VerificationRow(**key, **values))
                return
            for name, value in values.items():
                setattr(row, name, value)

    def verification(
        self, repo_id: int, target: str, probe: str, culprit: str, bad: str | None = None
    ) -> Verification | None:
        """The newest check of ``culprit`` for ``probe`` (against ``bad`` only, when given); None
        where it was never checked."""
        query = select(VerificationRow.record).where(
            VerificationRow.repository_id == repo_id,
            VerificationRow.target == target,
            VerificationRow.probe == probe,
            VerificationRow.culprit == culprit,
        )
        if bad is not None:
            query = query.where(VerificationRow.bad == bad)
        query = query.order_by(VerificationRow.verified_at.desc(), VerificationRow.id.desc()).limit(1)
        with self._reading() as session:
            record = session.scalar(query)
        return Verification.from_json(record) if record is not None else None

    def add_to_session_result(self, session_id: int, result: dict[str, Any]) -> None:
        """Merge ``result`` into a finished session's stored result: what was learnt after it ended
        (the culprit's check) is shown wherever the session is."""
        with self._writing() as session:
            row = session.get_one(BisectSession, session_id)
            row.result = {**(row.result or {}), **result}
