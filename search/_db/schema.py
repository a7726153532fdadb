"""Bringing a database to the schema this code knows, or refusing to touch it.

- empty database: created at the newest revision;
- database at an older revision of ours: upgraded (and logged);
- database at the newest revision: left alone;
- database at a revision we do not know (a newer llmcap, or another application's Alembic), or
  holding tables but no revision at all: refused with a ``DatabaseError``, nothing written.

The migrations live in ``search/_db/migrations`` next to this file and are run through Alembic's
API, so no alembic.ini is needed and an installed wheel works from any directory.
"""

from __future__ import annotations

import logging
import threading
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, inspect, text
from sqlalchemy.exc import DBAPIError

from search._db.connect import ENV_VAR, mask_url
from search._db.errors import DatabaseError

logger = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
VERSION_TABLE = "alembic_version"
# serialises concurrent first opens of one PostgreSQL database (any constant works)
_PG_LOCK_KEY = 0x6C6C6D636170  # "llmcap"
# Alembic's `context` and `op` are module-level proxies: two migrations running at once in one
# process would trample each other, so migrations in this process take turns
_ALEMBIC_LOCK = threading.Lock()


def alembic_config(script_location: Path | None = None) -> Config:
    """An Alembic configuration for our migrations, with no ini file."""
    config = Config()
    location = str(script_location or MIGRATIONS_DIR)
    config.set_main_option("script_location", location.replace("%", "%%"))
    config.set_main_option("path_separator", "os")
    return config


def head_revision(script_location: Path | None = None) -> str:
    """The newest schema revision this code knows."""
    head = ScriptDirectory.from_config(alembic_config(script_location)).get_current_head()
    assert head is not None, "the migrations directory holds no revision"
    return head


def current_revisions(connection: Connection) -> tuple[str, ...]:
    """The revision(s) the database is stamped with; empty for an unstamped database."""
    return tuple(MigrationContext.configure(connection).get_current_heads())


def ensure_schema(engine: Engine, *, script_location: Path | None = None) -> str:
    """Create, upgrade or refuse the database behind ``engine``; returns its revision after.

    A database already at the newest revision is only read. Otherwise the check is repeated
    under a lock (SQLite ``BEGIN IMMEDIATE``, a PostgreSQL advisory lock), so two processes
    opening a new database at once do not both create it, and the migration runs in that one
    transaction: one that fails leaves the database as it was.
    """
    config = alembic_config(script_location)
    script = ScriptDirectory.from_config(config)
    known = {revision.revision for revision in script.walk_revisions()}
    head = script.get_current_head()
    assert head is not None, "the migrations directory holds no revision"
    shown = mask_url(engine.url)
    try:
        with engine.connect() as connection:
            if _pending_change(connection, shown, known, head) is None:
                return head
        with _ALEMBIC_LOCK, engine.connect() as connection:
            connection.execution_options(sqlite_begin="BEGIN IMMEDIATE")
            with connection.begin():
                if connection.dialect.name == "postgresql":
                    connection.execute(
                        text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY}
                    )
                current = _pending_change(connection, shown, known, head)
                if current is None:  # another process did it meanwhile
                    return head
                if current:
                    logger.info(
                        "upgrading the results database %s from schema revision %s to %s",
                        shown,
                        ", ".join(current),
                        head,
                    )
                else:
                    logger.info("creating the results schema (revision %s) in %s", head, shown)
                config.attributes["connection"] = connection
                command.upgrade(config, "head")
    except DBAPIError as exc:
        raise DatabaseError(
            f"could not bring the results database {shown} to schema revision {head}: "
            f"{str(getattr(exc, 'orig', exc)).strip()}. The transaction was rolled back; fix "
            f"the cause (permissions, disk space, a lock held by another process) and run again."
        ) from None
    return head


def _pending_change(
    connection: Connection, shown: str, known: set[str], head: str
) -> tuple[str, ...] | None:
    """None when the database is at ``head``; else the revisions it is at (empty: a new
    database). Raises ``DatabaseError`` for a database we must not touch."""
    tables = set(inspect(connection).get_table_names())
    current = current_revisions(connection)
    if not current:
        foreign = sorted(tables - {VERSION_TABLE})
        if foreign:
            raise _not_ours(shown, foreign, stamped=VERSION_TABLE in tables)
        return ()
    unknown = [revision for revision in current if revision not in known]
    if unknown:
        raise _unknown_revision(shown, unknown, head)
    return None if current == (head,) else current


def llmcap_version() -> str:
    """The installed llmcap version (recorded with every job)."""
    try:
        return version("llmcap")
    except PackageNotFoundError:
        return "0+unknown"


def _unknown_revision(shown: str, found: list[str], head: str) -> DatabaseError:
    return DatabaseError(
        f"the results database {shown} is at schema revision {', '.join(found)}, which this "
        f"llmcap ({llmcap_version()}, newest schema revision {head}) does not know: it was written "
        f"by a newer llmcap, or it belongs to another application. Nothing was changed. Upgrade "
        f"llmcap (pip install -U llmcap) to use it, or use another database with --db URL "
        f"(or {ENV_VAR})."
    )


def _not_ours(shown: str, tables: list[str], *, stamped: bool) -> DatabaseError:
    listed = ", ".join(tables[:8]) + (", ..." if len(tables) > 8 else "")
    why = (
        "an empty alembic_version table"
        if stamped
        else "no llmcap schema revision (no alembic_version table)"
    )
    return DatabaseError(
        f"the database {shown} holds tables ({listed}) but {why}: it is not an llmcap results "
        f"database, or an unfinished one. Nothing was changed. Use another database with --db URL "
        f"(or {ENV_VAR}), e.g. a new file sqlite:///results.db."
    )
