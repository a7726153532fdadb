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


def records_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """--json / --csv: the command's rows for scripts, instead of its table (as `fmt`)."""
    func = click.option(
        "--csv", "fmt", flag_value="csv", help="Print the rows as CSV (nested values as JSON)."
    )(func)
    return click.option("--json", "fmt", flag_value="json", help="Print the rows as JSON.")(func)


def emit_records(rows: list[dict[str, Any]], fmt: str) -> None:
    """Write `rows` to stdout as JSON (a list of objects) or CSV (one header, nested values
    as JSON text)."""
    import json

    rows = [_plain(row) for row in rows]
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2, default=str))
        return
    import csv
    import io

    out = io.StringIO()
    fields = list(dict.fromkeys(key for row in rows for key in row))
    writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: json_text(v) for k, v in row.items()})
    click.echo(out.getvalue(), nl=False)


def json_text(value: Any) -> Any:
    """A nested value (dict or list) as JSON text for a flat format (CSV, Parquet); others as
    they are."""
    import json

    return json.dumps(value, default=str) if isinstance(value, dict | list) else value


def _plain(value: Any) -> Any:
    """JSON-ready: enums as their values, tuples as lists, through dicts and lists."""
    import enum

    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def print_table(table: Any, whole: bool = True) -> None:
    """Print a rich table.  `whole`: as wide as it needs, even past the terminal (a --wide
    table in a pipe or an 80-column window loses no value to cropping); else in the
    terminal's width, text columns wrapping (numbers and ids never do)."""
    from rich.console import Console

    console = Console()
    needed = Console(width=1_000).measure(table).maximum  # its natural width, unconstrained
    if whole and needed > console.width:
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
