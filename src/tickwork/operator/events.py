"""Events like a CronJob's, derived from what the status rounds read (pure): no query of its own.

Each round, :meth:`Recorder.observe` compares what it sees of a schedule (its last job and its
skipped count) with what the previous round saw of the same object:

* ``SuccessfulCreate`` (Normal): the last job changed: a job was created for an occurrence;
* ``SawCompletedJob`` (Normal): the last job ended ``succeeded`` or ``cancelled``;
* ``JobFailed`` (Warning): the last job ended ``dead`` (its attempts used up);
* ``SkippedOccurrences`` (Warning): the skipped count grew (misfires, overlap), by how many.

The first round of an object (after a start of the operator, or once its row is first read)
only records the baseline, so a restart posts nothing. At most one Event per reason per object
is posted within ``window`` seconds; what happens meanwhile is counted into the next one
("3 jobs created since ..."), posted by the first round after the window.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from tickwork.errors import summary

SUCCESSFUL_CREATE = "SuccessfulCreate"
SAW_COMPLETED_JOB = "SawCompletedJob"
JOB_FAILED = "JobFailed"
SKIPPED_OCCURRENCES = "SkippedOccurrences"

COMPLETED = frozenset({"succeeded", "cancelled"})
FAILED = "dead"
TRACEBACK = "Traceback (most recent call last):"
ERROR_SHOWN = 200
"""At most this many characters of a dead job's last error go into its Event."""

Key = tuple[str, str]
"""The object: (Kubernetes namespace, name)."""


@dataclass(frozen=True)
class Seen:
    """What one round read of a schedule."""

    skipped: int
    job_id: int | None = None
    job_status: str | None = None
    """The last job's status name (available, running, succeeded, dead, cancelled)."""
    occurrence_at: datetime | None = None
    duration_seconds: float | None = None
    attempt: int | None = None
    error: str | None = None


@dataclass(frozen=True)
class Event:
    type: str
    """Normal or Warning."""
    reason: str
    message: str


@dataclass(frozen=True)
class Happening:
    """One change between two rounds, before rate limiting."""

    type: str
    reason: str
    count: int
    what: str
    """The plural noun the count counts ("jobs created")."""
    message: str
    """The Event's message when it is posted alone."""


def happenings(before: Seen, after: Seen) -> list[Happening]:
    """What changed from one round to the next."""
    found: list[Happening] = []
    new_job = after.job_id is not None and after.job_id != before.job_id
    if new_job:
        occurrence = (
            f"for the occurrence {_time(after.occurrence_at)}"
            if after.occurrence_at is not None
            else "outside the timetable (a trigger)"
        )
        found.append(
            Happening(
                "Normal",
                SUCCESSFUL_CREATE,
                1,
                "jobs created",
                f"Created job {after.job_id} {occurrence}",
            )
        )
    ended = new_job or after.job_status != before.job_status
    if ended and after.job_status in COMPLETED:
        took = f" after {after.duration_seconds:g}s" if after.duration_seconds is not None else ""
        found.append(
            Happening(
                "Normal",
                SAW_COMPLETED_JOB,
                1,
                "jobs completed",
                f"Saw completed job {after.job_id}: {after.job_status}{took}",
            )
        )
    if ended and after.job_status == FAILED:
        attempts = f" after {after.attempt} attempts" if after.attempt is not None else ""
        error = f": {_shorten(after.error)}" if after.error else ""
        found.append(
            Happening(
                "Warning",
                JOB_FAILED,
                1,
                "jobs dead",
                f"Job {after.job_id} is dead{attempts}{error}",
            )
        )
    if after.skipped > before.skipped:
        skipped = after.skipped - before.skipped
        found.append(
            Happening(
                "Warning",
                SKIPPED_OCCURRENCES,
                skipped,
                "occurrences skipped",
                f"Skipped {skipped} occurrence{'' if skipped == 1 else 's'} "
                f"({after.skipped} since creation)",
            )
        )
    return found


@dataclass
class _Pending:
    type: str
    count: int
    times: int
    """How many changes were held (each may count several, as skipped occurrences do)."""
    since: datetime
    what: str
    message: str


class Recorder:
    """The previous round of every object, and the Events held back by the rate limit."""

    def __init__(self, window: float) -> None:
        self.window = timedelta(seconds=window)
        self._seen: dict[Key, tuple[str | None, Seen]] = {}
        self._posted: dict[tuple[Key, str], datetime] = {}
        self._pending: dict[tuple[Key, str], _Pending] = {}

    def observe(self, key: Key, uid: str | None, seen: Seen | None, now: datetime) -> list[Event]:
        """The Events to post for ``key`` this round. ``seen``: None when nothing was read for
        it (then only held-back Events whose window has passed go out)."""
        if seen is not None:
            before = self._seen.get(key)
            self._seen[key] = (uid, seen)
            if before is None or before[0] != uid:
                self.forget(key, keep_seen=True)  # a first round, or a new object: the baseline
                return []
            for happening in happenings(before[1], seen):
                self._hold(key, happening, now)
        return self._due(key, now)

    def forget(self, key: Key, *, keep_seen: bool = False) -> None:
        """Drop what is kept of ``key`` (the object is gone)."""
        if not keep_seen:
            self._seen.pop(key, None)
        for kept in (self._posted, self._pending):
            for known in [k for k in kept if k[0] == key]:
                del kept[known]

    def _hold(self, key: Key, happening: Happening, now: datetime) -> None:
        pending = self._pending.get((key, happening.reason))
        if pending is None:
            self._pending[(key, happening.reason)] = _Pending(
                happening.type, happening.count, 1, now, happening.what, happening.message
            )
        else:
            pending.count += happening.count
            pending.times += 1
            pending.type, pending.message = happening.type, happening.message

    def _due(self, key: Key, now: datetime) -> list[Event]:
        events = []
        for (of, reason), pending in list(self._pending.items()):
            if of != key:
                continue
            posted = self._posted.get((key, reason))
            if posted is not None and now - posted < self.window:
                continue
            del self._pending[(key, reason)]
            self._posted[(key, reason)] = now
            events.append(Event(pending.type, reason, _message(pending)))
        return events


def _message(pending: _Pending) -> str:
    if pending.times == 1:
        return pending.message
    return (
        f"{pending.count} {pending.what} since {_time(pending.since)} (the last: {pending.message})"
    )


def _time(value: datetime | None) -> str:
    if value is None:
        return "an unknown time"
    return value.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _shorten(text: str) -> str:
    """A dead job's error for its Event on one line: of a traceback (what a worker records
    for a task that raised), its last line, the exception."""
    if text.lstrip().startswith(TRACEBACK):
        text = summary(text)
    line = " ".join(text.split())
    return line if len(line) <= ERROR_SHOWN else line[: ERROR_SHOWN - 1] + "…"
