"""Pieces every `llmcap` command shares: error reporting and the --db option."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import click
from pydantic import ValidationError

from search._errors import format_validation_error, is_user_error
from sku_catalog._yaml import shorten

EXIT_BAD_INPUT = 2


def user_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """Print a user-input error as one message and exit 2, without a traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ValidationError as exc:
            click.echo(f"error: {format_validation_error(exc, 'input')}", err=True)
        except OSError as exc:  # a file the user named: missing, unwritable, a full disk
            click.echo(f"error: {describe_os_error(exc)}", err=True)
        except Exception as exc:
            if not is_user_error(exc):
                raise
            message = exc.args[0] if exc.args else str(exc)
            click.echo(f"error: {message}", err=True)
        sys.exit(EXIT_BAD_INPUT)

    return wrapper


def print_table(table: Any) -> None:
    """Print a rich table whole: as wide as it needs, even past the terminal (a --wide table
    in a pipe or an 80-column window loses no value to cropping)."""
    from rich.console import Console

    console = Console()
    needed = Console(width=1_000).measure(table).maximum  # its natural width, unconstrained
    if needed > console.width:
        console = Console(width=needed)
    console.print(table)


def describe_os_error(exc: OSError) -> str:
    """What went wrong with which file, in words ("No space left on device: /dev/full")."""
    if exc.strerror is None:  # raised with a message of ours
        return str(exc)
    names = [str(n) for n in (exc.filename, exc.filename2) if n is not None]
    where = f": {' -> '.join(shorten(n) for n in names)}" if names else ""
    return f"{exc.strerror}{where}"


db_option = click.option(
    "--db",
    "db",
    default=None,
    metavar="URL",
    help="Results database: sqlite:///results.db (default) or postgresql://user:pw@host/db; "
    "also read from LLMCAP_DB.",
)


def open_db(url: str | None, *, create: bool = True):
    """The results database; ``create=False`` for commands that only read (a SQLite file
    that does not exist is then an error, not a new empty database)."""
    from search._db import open_database

    return open_database(url, create=create)
