"""The one error the results database raises for the user to read."""

from __future__ import annotations


class DatabaseError(Exception):
    """A results-database problem explained for the user: what went wrong and how to fix it.

    The message never contains a password (URLs are shown masked) and is meant to be printed as
    it stands by the CLI, without a traceback.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message
