"""Persistence: SQLAlchemy models, the store API and Alembic migrations."""
