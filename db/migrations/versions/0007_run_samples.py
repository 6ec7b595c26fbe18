"""Run samples: every sample a metric probe took in one execution, by metric.

A metric probe (a timing, a throughput) takes several samples of each metric per execution; the
run keeps them all, beside the median stored among its metrics, so that a later comparison ranks
the samples themselves. Runs of other probes, and runs stored before, hold none.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("samples", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("samples")
