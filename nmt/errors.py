"""The errors a user can cause, each printed as one line: the ground floor every room raises
from, and the one place the commands (nmt.cli) and the server read them from.

`UsageError` and its kinds are settings that cannot work (a command exits 2 on them);
`JobError` is a request refused, with the HTTP status it answers (413 over a limit, 415 a
file type we do not read, 422 anything malformed), which a command prints as its error.
"""

from __future__ import annotations


class UsageError(ValueError):
    """A command line that cannot work as given (exit code 2); the message is one line."""


class SearchError(UsageError):
    """Settings that make no search as a whole."""


class SpanError(UsageError):
    """A protection setting that cannot work."""


class GlossaryError(UsageError):
    """A glossary we cannot use."""


class JobError(ValueError):
    """A job we refuse: `status` (413, 415 or 422) and a one-line message."""

    def __init__(self, status: int, message: str):
        super().__init__(message.splitlines()[0] if message else message)
        self.status = status
