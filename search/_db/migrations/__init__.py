"""Alembic migrations of the results schema (run programmatically by ``search._db.schema``)."""
