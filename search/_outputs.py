"""Output files the user names (--requests-out, --trace-out, --out): checked before any work.

A simulation or an export that runs to the end and then cannot write its file has wasted the
user's time, so each output path is checked first: a file type llmcap writes, a parent folder
that exists (llmcap never creates folders), and a place where a file can be created.  A write
that still fails (a full disk) says why, naming the option and the file.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from search._errors import OutputError
from sku_catalog._yaml import shorten

PARQUET_INSTALL = "pip install pyarrow"


def check_output_file(path: Path, option: str, suffixes: Sequence[str]) -> Path:
    """``path`` if a file of one of ``suffixes`` can be written there; `OutputError` if not."""
    shown = f"{option} {shorten(path)}"
    suffix = path.suffix.lower()
    if suffix not in suffixes:
        raise OutputError(
            f"{shown}: unknown file type {path.suffix or '(none)'!r}; allowed: "
            f"{', '.join(suffixes)}"
        )
    if suffix == ".parquet":
        _check_parquet_writer(shown)
    try:
        _check_writable(path, shown)
    except OutputError:
        raise
    except OSError as exc:
        raise OutputError(f"{shown}: cannot write there: {exc.strerror or exc}") from None
    except ValueError as exc:  # a NUL byte in the name
        raise OutputError(f"{shown}: {exc}") from None
    return path


def _check_writable(path: Path, shown: str) -> None:
    folder = path.parent
    if not folder.exists():
        raise OutputError(
            f"{shown}: the folder {shorten(folder)} does not exist (llmcap does not create "
            "folders: create it, or write somewhere else)"
        )
    if not folder.is_dir():
        raise OutputError(f"{shown}: {shorten(folder)} is not a folder")
    if path.is_dir():
        raise OutputError(f"{shown}: is a folder; give a file name")
    if path.exists():
        if not os.access(path, os.W_OK):
            raise OutputError(f"{shown}: the file exists and is not writable")
        return
    # can a file be created there? (permissions, a read-only disk, /proc)
    with tempfile.TemporaryFile(dir=folder, prefix=".llmcap-write-check-"):
        pass


def _check_parquet_writer(shown: str) -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise OutputError(
            f"{shown}: writing Parquet needs pyarrow ({PARQUET_INSTALL}); or write .csv"
        ) from None


@contextmanager
def writing(path: Path, option: str) -> Iterator[None]:
    """Turn an OSError while writing ``path`` into an `OutputError` naming the option."""
    try:
        yield
    except OSError as exc:
        raise OutputError(f"cannot write {option} {shorten(path)}: {exc.strerror or exc}") from None
