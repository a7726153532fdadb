"""Alembic environment of the results database.

llmcap runs its migrations programmatically (``search._db.schema``), handing over an open
connection in ``config.attributes["connection"]``; there is no alembic.ini. Any llmcap command that
opens a database brings it to the newest revision. Without a connection, the URL comes from the
``sqlalchemy.url`` option (offline mode emits the SQL instead of running it).
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine

from search._db.models import Base

config = context.config
target_metadata = Base.metadata


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things: later migrations use batch mode there
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )


def run_migrations_offline() -> None:
    """Emit the SQL script instead of running it (``alembic upgrade --sql``)."""
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection: Connection | None = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(str(config.get_main_option("sqlalchemy.url")))
    try:
        with engine.begin() as own_connection:
            _configure(own_connection)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
