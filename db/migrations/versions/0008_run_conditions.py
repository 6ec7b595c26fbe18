"""Run conditions: what moved a metric probe's timings as it ran.

The CPU's frequency governor, and for a GPU its clocks, power limit, temperature and throttle
reasons, read by the worker right after a metric probe's case (``tracker.execution.conditions``).
Per run, not in the environment: they change between runs on one machine. Other probes' runs,
and runs stored before, hold none.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("conditions", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("conditions")
