"""Environment facts: what a target declares about its environment, part of the fingerprint.

Environments stored before this revision declared none; they get an empty table, which leaves
their fingerprints as they were.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-10
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("environments") as batch:
        batch.add_column(sa.Column("facts", sa.JSON(), nullable=True))
    op.execute("UPDATE environments SET facts = '{}'")
    with op.batch_alter_table("environments") as batch:
        batch.alter_column("facts", existing_type=sa.JSON(), nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("environments") as batch:
        batch.drop_column("facts")
