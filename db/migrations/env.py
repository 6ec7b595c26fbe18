"""Alembic environment: migrates the connection that db.store puts in ``config.attributes``."""

from __future__ import annotations

from alembic import context

from db.models import Base

context.configure(
    connection=context.config.attributes["connection"],
    target_metadata=Base.metadata,
    render_as_batch=True,
)
with context.begin_transaction():
    context.run_migrations()
