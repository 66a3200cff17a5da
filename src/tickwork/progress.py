"""How far a running task has got, as it reports it (pure): ``await job.progress(0.4, "copied
4 of 10 tables")`` (a sync task calls it without ``await``).

A report is a fraction in 0..1 (None: not known) and a message. Reporting never holds up the
task and never fails it for a value: a fraction outside 0..1 is shown at the nearer end (NaN as
not known), a message longer than :data:`MAX_MESSAGE_LENGTH` characters is cut, and NUL or an
unpaired surrogate (which PostgreSQL cannot store) is replaced; each such change is noted
(:attr:`Report.note`) and the worker logs it once per job. Only a value of the wrong type (a
fraction that is not a number, a message that is not text) raises
:class:`~tickwork.errors.InvalidInput` at once: that is a bug in the task, not a value.

The report goes to the sink of the worker running the task (:data:`SINK`, set by the worker;
:mod:`tickwork.worker.progress` keeps the latest report of each job and writes it at most once
per interval). Outside a worker (a task function called directly, in a unit test) there is no
sink and a report goes nowhere.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from numbers import Real
from typing import Any, Protocol

from tickwork.errors import InvalidInput

MAX_MESSAGE_LENGTH = 500
"""A progress message is cut to this many characters (the last one an ellipsis)."""


@dataclass(frozen=True, eq=False)
class Report:
    """One progress report. Compared by identity: the worker writes a report once."""

    fraction: float | None
    message: str | None
    attempt: int
    note: str | None = None
    """What was changed to make the report storable (logged once per job), or None."""

    def to_json(self) -> Mapping[str, Any]:
        """The report as stored in ``tickwork.jobs.progress`` (the database adds ``at``)."""
        return {"fraction": self.fraction, "message": self.message, "attempt": self.attempt}


class Reporting(Protocol):
    """The job reporting (a :class:`tickwork.model.Job`; typed here without importing it)."""

    @property
    def attempt(self) -> int: ...


Sink = Callable[[Any, Report], None]
"""Takes a job's report; called on the task's thread (the loop, or a sync task's thread)."""

SINK: ContextVar[Sink | None] = ContextVar("tickwork_progress_sink", default=None)
"""The running worker's sink; its slots, and the sync tasks they run, inherit it."""


def make_report(fraction: Any, message: Any, attempt: int) -> Report:
    """``fraction`` and ``message`` as a storable report; InvalidInput naming the argument for
    a value of the wrong type."""
    notes: list[str] = []
    shown = _fraction(fraction, notes)
    if message is not None and not isinstance(message, str):
        raise InvalidInput(
            "progress.message", f"must be text or None, not {type(message).__name__}"
        )
    text = None if message is None else _message(message, notes)
    return Report(shown, text, attempt, "; ".join(notes) or None)


def _fraction(fraction: Any, notes: list[str]) -> float | None:
    if fraction is None:
        return None
    if isinstance(fraction, bool) or not isinstance(fraction, Real):
        raise InvalidInput(
            "progress.fraction",
            f"must be a number between 0 and 1 or None, not {type(fraction).__name__}",
        )
    value = float(fraction)
    if math.isnan(value):
        notes.append("fraction NaN: shown as not known")
        return None
    if not 0.0 <= value <= 1.0:
        clamped = min(max(value, 0.0), 1.0)
        notes.append(f"fraction {value:g} outside 0..1: shown as {clamped:g}")
        return clamped
    return value


def _message(message: str, notes: list[str]) -> str:
    if "\x00" in message:
        message = message.replace("\x00", "\ufffd")
        notes.append("message: NUL characters replaced")
    try:
        message.encode("utf-8")
    except UnicodeEncodeError:
        message = message.encode("utf-8", "replace").decode("utf-8")
        notes.append("message: unpaired surrogates replaced")
    if len(message) > MAX_MESSAGE_LENGTH:
        notes.append(f"message of {len(message)} characters cut to {MAX_MESSAGE_LENGTH}")
        message = message[: MAX_MESSAGE_LENGTH - 1] + "…"
    return message


class Reported:
    """What :func:`report` returns: already done, so awaiting it returns at once, and a sync
    task may ignore it (no coroutine left un-awaited)."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        return
        yield  # a generator that finishes at once


_DONE = Reported()


def report(job: Reporting, fraction: Any, message: Any = None) -> Reported:
    """Hand ``job``'s progress to the worker running it (nothing outside a worker)."""
    made = make_report(fraction, message, job.attempt)
    sink = SINK.get()
    if sink is not None:
        sink(job, made)
    return _DONE
