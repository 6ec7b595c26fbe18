"""Verifications: each culprit checked by measuring the bad end with the culprit's change undone.

One row per repository, target, probe, culprit and bad end, holding the whole answer as JSON; a
later check of the same culprit and bad end replaces it.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-18
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "verifications",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("repository_id", sa.Integer(), nullable=False),
        sa.Column("target", sa.String(255), nullable=False),
        sa.Column("probe", sa.String(255), nullable=False),
        sa.Column("culprit", sa.String(64), nullable=False),
        sa.Column("bad", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("record", sa.JSON(), nullable=False),
        sa.Column("verified_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["repository_id"], ["repositories.id"], name="fk_verifications_repository_id_repositories"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_verifications"),
        sa.UniqueConstraint(
            "repository_id",
            "target",
            "probe",
            "culprit",
            "bad",
            name="uq_verifications_repository_id_target_probe_culprit_bad",
        ),
    )


def downgrade() -> None:
    op.drop_table("verifications")
