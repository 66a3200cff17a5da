"""Errors tickwork raises on purpose. Each one carries a message fit for a user's terminal."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

MIGRATE_HINT = "run `tickwork migrate` first"


class TickworkError(Exception):
    """Base class: the command line prints these as one line and exits non-zero."""


class ConfigurationError(TickworkError):
    """A setting or argument is invalid."""


class DatabaseUnavailable(TickworkError):
    """The database cannot be reached."""


class MigrationError(TickworkError):
    """A migration cannot be applied (for example its checksum changed after it was applied)."""


class SchemaMissing(TickworkError):
    """The database has no tickwork schema, or an older one than this version needs."""


class InvalidInput(TickworkError):
    """A value given to the API is invalid; names the field and the reason."""

    def __init__(self, field: str, reason: str, *, where: str | None = None) -> None:
        self.field = field
        self.reason = reason
        self.where = where
        prefix = f"{where}: " if where else ""
        super().__init__(f"{prefix}{field}: {reason}")


class UnknownTask(TickworkError):
    """No task of that kind is registered."""


class NamespaceOwned(TickworkError):
    """The namespace belongs to another owner; sync with ``take_over`` to claim it."""


class ScheduleNotFound(TickworkError):
    """No schedule has that namespace and name."""


class JobNotFound(TickworkError):
    """No job has that id."""


class InvalidTransition(TickworkError):
    """The job is not in a state that allows the requested change."""


def summary(error: str | None) -> str:
    """The last non-empty line of an error text (of a traceback: the exception itself)."""
    lines = (error or "").strip().splitlines()
    return lines[-1] if lines else ""


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`` (did you mean `closest`?)`` when one of ``known`` is close to ``word``, else ``""``."""
    close = difflib.get_close_matches(word, sorted(known), n=1, cutoff=0.7)
    return f" (did you mean `{close[0]}`?)" if close else ""
