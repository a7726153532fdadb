"""Database URLs and engines: which database, how to reach it, and what to say when it can't be.

The URL comes from the caller (``--db``), else the environment variable ``LLMCAP_DB``, else
``sqlite:///results.db`` in the working directory. A bare path (no ``:`` or ``@``) means a SQLite
file.
``postgresql://`` and ``postgres://`` mean PostgreSQL through psycopg 3
(``postgresql+psycopg://``).

A URL with a user but no password (as ``llmcap search submit`` sends it to a cluster, so that the
password never shows in the job's entrypoint or logs) gets its password where it runs: from the
variable that ``LLMCAP_DB_PASSWORD_ENV`` names, else from ``LLMCAP_DB`` when that names the same
database as the same user; otherwise the driver's own defaults apply (libpq reads ``PGPASSWORD``
and ``~/.pgpass``).

SQLite connections get foreign keys on and a busy timeout; once the schema has been checked,
the database is switched to WAL journal mode (``open_database`` does that, not the first
connection, so that a database we refuse to touch is left byte for byte as it was).
"""

from __future__ import annotations

import os
import re
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError
from sqlalchemy.pool import StaticPool

from search._db.errors import DatabaseError

ENV_VAR = "LLMCAP_DB"
PASSWORD_ENV_VAR = "LLMCAP_DB_PASSWORD_ENV"  # names the variable that holds the password
DEFAULT_URL = "sqlite:///results.db"
POSTGRES_URL_FORM = "postgresql+psycopg://user:password@host:5432/dbname"
SQLITE_URL_FORM = "sqlite:///path/to/results.db"
SQLITE_BUSY_TIMEOUT_S = 30.0
POSTGRES_CONNECT_TIMEOUT_S = 10

_HOW_TO_CHOOSE = (
    f"Choose the database with --db URL or the {ENV_VAR} environment variable "
    f"(SQLite: {SQLITE_URL_FORM}; PostgreSQL: {POSTGRES_URL_FORM}); "
    f"without either, llmcap uses {DEFAULT_URL} in the current directory."
)


def resolve_url(url: str | None = None) -> str:
    """The URL to use: ``url`` if given, else ``$LLMCAP_DB``, else ``sqlite:///results.db``."""
    if url is not None and url.strip():
        return url.strip()
    from_env = os.environ.get(ENV_VAR, "").strip()
    return from_env or DEFAULT_URL


def _authority(url: str) -> str:
    """The part of ``scheme://authority/path`` between ``://`` and the next ``/``, ``?`` or
    ``#``."""
    rest = url.split("://", 1)[1] if "://" in url else ""
    return re.split(r"[/?#]", rest, maxsplit=1)[0]


def mask_url(url: str | URL) -> str:
    """The URL with its password (and a ``password`` query parameter) replaced by ``***``:
    safe to print and log."""
    if not isinstance(url, URL):
        if _authority(url).count("@") > 1:
            # an unescaped "@" in the password: hide everything up to the last "@"
            return re.sub(r"^([^:/]+://[^:/@]*):[^/?#]*@", r"\1:***@", url)
        try:
            url = make_url(url)
        except ArgumentError:
            # not parseable: still hide anything between "user:" and "@"
            return re.sub(r"([^:/@]+):[^@/]*@", r"\1:***@", url)
    if "password" in url.query:
        url = url.update_query_dict({"password": "***"})
    return url.render_as_string(hide_password=True)


def without_password(url: str) -> tuple[str, bool]:
    """``url`` with its password removed (from the user part and a ``password`` query
    parameter), and whether there was one: safe to send where others can read it."""
    if "://" not in url:
        return url, False  # a bare SQLite path
    if _authority(url).count("@") > 1:
        raise DatabaseError(
            f"the database URL {mask_url(url)} has more than one '@' before its host: write an "
            "'@' in the user name or password as %40."
        )
    try:
        parsed = make_url(url)
    except ArgumentError:
        stripped = re.sub(r"^([^:/]+://[^:/@]*):[^@/]*@", r"\1@", url)
        return stripped, stripped != url
    if parsed.password is None and "password" not in parsed.query:
        return url, False
    stripped = parsed._replace(password=None).difference_update_query(["password"])
    return stripped.render_as_string(hide_password=False), True


_DEFAULT_PORTS = {"postgresql": 5432}


def _same_database(a: URL, b: URL) -> bool:
    def key(url: URL) -> tuple:
        backend = url.get_backend_name()
        port = url.port or _DEFAULT_PORTS.get(backend)
        return (backend, (url.host or "localhost").lower(), port, url.database, url.username)

    return key(a) == key(b)


def _password_from_environment(url: URL) -> URL:
    """Give a password-less server URL its password from this machine's environment."""
    if url.get_backend_name() == "sqlite" or url.password is not None:
        return url
    if "password" in url.query:
        return url
    name = os.environ.get(PASSWORD_ENV_VAR, "").strip()
    if name:
        password = os.environ.get(name)
        if password is None:
            raise DatabaseError(
                f"{PASSWORD_ENV_VAR} says the password of {mask_url(url)} is in the environment "
                f"variable {name}, but {name} is not set on this machine. Set it (from a secret), "
                f"or let {ENV_VAR} name the database with its password."
            )
        return url.set(password=password)
    if url.username is None:
        return url
    configured = os.environ.get(ENV_VAR, "").strip()
    if configured and "://" in configured:
        try:
            other = parse_url(configured, fill_password=False)
        except DatabaseError:
            return url
        if other.password is not None and _same_database(url, other):
            return url.set(password=other.password)
    return url


def parse_url(raw: str, *, fill_password: bool = True) -> URL:
    """Parse a database URL (or a bare SQLite file path), normalising PostgreSQL to psycopg 3."""
    if "://" not in raw and ":" not in raw and "@" not in raw:
        return URL.create("sqlite", database=raw)
    try:
        url = make_url(raw)
    except ArgumentError:
        raise DatabaseError(
            f"cannot parse the database URL {mask_url(raw)!r}. {_HOW_TO_CHOOSE}"
        ) from None
    if url.drivername in ("postgres", "postgresql"):
        url = url.set(drivername="postgresql+psycopg")
    return _password_from_environment(url) if fill_password else url


def is_sqlite_file(url: URL) -> bool:
    """True for a SQLite database kept in a file (not ``:memory:``)."""
    return url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:")


@dataclass(slots=True, weakref_slot=True, eq=False)
class _SQLitePragmas:
    """Connect hook: foreign keys and busy timeout on every connection, WAL when asked.

    It also turns off the sqlite3 module's own transaction handling (which never begins a
    transaction before DDL); ``_begin_sqlite`` emits BEGIN instead, so migrations are atomic on
    SQLite too (the SQLAlchemy pysqlite recipe).
    """

    wal: bool

    def __call__(self, dbapi_connection: Any, connection_record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute(f"PRAGMA busy_timeout={int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
            if self.wal and cursor.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                _switch_to_wal(cursor)
        finally:
            cursor.close()


def _switch_to_wal(cursor: Any) -> None:
    """Turn WAL on (persistent for the file). The switch needs the database to itself and
    SQLite answers "locked" at once, without its busy timeout, while another connection is
    writing: wait for it here instead."""
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_S
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def make_engine(url: URL, *, wal: bool = True, echo: bool = False) -> Engine:
    """An engine for ``url``; bad dialects and missing drivers become a ``DatabaseError``."""
    shown = mask_url(url)
    kwargs: dict[str, Any] = {"echo": echo}
    backend = url.get_backend_name()
    if backend == "sqlite":
        _check_sqlite_directory(url)
        kwargs["connect_args"] = {"timeout": SQLITE_BUSY_TIMEOUT_S}
        if not is_sqlite_file(url):
            # one shared connection, or every connection would see its own empty database
            kwargs["poolclass"] = StaticPool
            kwargs["connect_args"]["check_same_thread"] = False
    elif backend == "postgresql":
        kwargs["pool_pre_ping"] = True
        if "connect_timeout" not in url.query:
            kwargs["connect_args"] = {"connect_timeout": POSTGRES_CONNECT_TIMEOUT_S}
    try:
        engine = create_engine(url, **kwargs)
    except NoSuchModuleError:
        raise DatabaseError(
            f"unknown database kind {url.drivername!r} in {shown}: llmcap supports SQLite and "
            f"PostgreSQL. {_HOW_TO_CHOOSE}"
        ) from None
    except ImportError as exc:
        advice = (
            f"llmcap talks to PostgreSQL through psycopg 3: write the URL as {POSTGRES_URL_FORM} "
            f"(pip install 'psycopg[binary]' if that is missing too)"
            if backend == "postgresql"
            else f"install the module it names, or {_HOW_TO_CHOOSE[0].lower()}{_HOW_TO_CHOOSE[1:]}"
        )
        raise DatabaseError(
            f"the database driver for {shown} is not installed ({exc}); {advice}."
        ) from None
    except ArgumentError as exc:
        raise DatabaseError(f"invalid database URL {shown}: {exc}. {_HOW_TO_CHOOSE}") from None
    if backend == "sqlite":
        event.listen(engine, "connect", _SQLitePragmas(wal=wal and is_sqlite_file(url)))
        event.listen(engine, "begin", _begin_sqlite)
    return engine


def _begin_sqlite(connection: Connection) -> None:
    # "BEGIN IMMEDIATE" (execution option sqlite_begin) takes the write lock up front
    connection.exec_driver_sql(connection.get_execution_options().get("sqlite_begin", "BEGIN"))


def check_connection(engine: Engine) -> None:
    """Connect once and read the catalogue; any failure becomes a ``DatabaseError`` saying how
    to fix it."""
    try:
        with engine.connect() as connection:
            if engine.dialect.name == "sqlite":
                # reads the file header: "file is not a database" shows up here
                connection.execute(text("SELECT count(*) FROM sqlite_master"))
            else:
                connection.execute(text("SELECT 1"))
    except DBAPIError as exc:
        raise connection_error(engine.url, exc) from None


def connection_error(url: URL, exc: BaseException) -> DatabaseError:
    """A user-facing error for a database that cannot be reached or opened."""
    shown = mask_url(url)
    reason = _driver_message(url, exc)
    backend = url.get_backend_name()
    if backend == "sqlite":
        path = url.database or ":memory:"
        if "not a database" in reason or "malformed" in reason:
            return DatabaseError(
                f"{path} ({shown}) is not a SQLite database, or it is damaged ({reason}). "
                f"Nothing was changed. Point --db (or {ENV_VAR}) at another file; a file that "
                f"does not exist yet is created."
            )
        return DatabaseError(
            f"cannot open the SQLite database {path} ({shown}): {reason}. Check that its "
            f"directory exists and is writable, or point --db at another file ({SQLITE_URL_FORM})."
        )
    if backend == "postgresql":
        where = f"{url.host or 'localhost'}:{url.port or 5432}"
        lowered = reason.lower()
        if "authentication" in lowered or "password" in lowered:
            hint = "Check the user name and password in the URL."
        elif "does not exist" in lowered:
            hint = (
                f"Create the database (createdb -h {url.host or 'localhost'} "
                f"{url.database or 'NAME'}) or fix its name in the URL."
            )
        else:
            hint = (
                f"Is the PostgreSQL server running and reachable at {where}? "
                f"Check the host, port and credentials in the URL."
            )
        return DatabaseError(
            f"cannot connect to the PostgreSQL database {shown} ({reason}). {hint} The URL form "
            f"is {POSTGRES_URL_FORM}, given with --db or {ENV_VAR}."
        )
    return DatabaseError(f"cannot connect to the database {shown} ({reason}). {_HOW_TO_CHOOSE}")


def _driver_message(url: URL, exc: BaseException) -> str:
    original = getattr(exc, "orig", None) or exc
    lines = [line.strip().rstrip(".") for line in str(original).splitlines() if line.strip()]
    message = "; ".join(lines[:3]) or type(original).__name__
    if url.password:
        message = message.replace(str(url.password), "***")
    return message


def _check_sqlite_directory(url: URL) -> None:
    if not is_sqlite_file(url) or url.query.get("uri") or str(url.database).startswith("file:"):
        return
    directory = Path(str(url.database)).resolve().parent
    if not directory.is_dir():
        raise DatabaseError(
            f"cannot create the SQLite database {url.database} ({mask_url(url)}): the directory "
            f"{directory} does not exist. Create it, or point --db at another file "
            f"({SQLITE_URL_FORM}, or {ENV_VAR})."
        )
