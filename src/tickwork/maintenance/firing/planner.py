"""Planning the firing of one due schedule, pure: which of its due occurrences get a job
(the misfire policy, and FixedDelay's one at a time), and where its next run goes. Time comes
in as arguments; nothing here reads a clock or the database, so it is tested exhaustively on
its own. The overlap (concurrency) policy needs the schedule's open jobs and is applied later
by the firing pass (:mod:`.service`), with :func:`tickwork.schedules.policies.decide_overlap`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol
from zoneinfo import ZoneInfo

from tickwork.schedules import calendars, occurrences, policies
from tickwork.schedules.definition import ScheduleDefinition

_TICK = timedelta(microseconds=1)


@dataclass(frozen=True)
class Compiled:
    """A stored definition, parsed once per (namespace, name, revision)."""

    definition: ScheduleDefinition
    timetable: calendars.Calendared | None
    """None for FixedDelay, whose occurrences start from each due time."""
    zone: ZoneInfo
    delay: timedelta | None
    calendar: calendars.Calendar = calendars.NO_CALENDAR
    """``spec.exclude``, ``startTime`` and ``endTime`` (what FixedDelay's steps honour)."""


class Due(Protocol):
    """What planning reads of a claimed schedule."""

    @property
    def next_run_at(self) -> datetime: ...
    @property
    def now(self) -> datetime:
        """The claim's time (the database's, unless pinned)."""

    @property
    def missed_before(self) -> datetime | None: ...


@dataclass(frozen=True)
class Planned:
    """The misfire decisions and next run of one schedule."""

    computed: int
    """Occurrences computed (what the pass's budget counts)."""
    fire: tuple[datetime, ...]
    """Occurrences to make jobs of (before the overlap policy)."""
    misfired: int
    """Occurrences thrown away by the misfire policy (and FixedDelay's one-at-a-time)."""
    next_run_at: datetime | None
    """None: the calendar has ended (past ``spec.endTime``)."""
    backlog: bool
    """Still due after this pass: a chunk was not enough."""


class NextAfter:
    """``next_after`` remembered for one batch: schedules due together mostly share their
    expression (hourly, daily, ...), so each distinct one is computed once."""

    def __init__(self) -> None:
        self._found: dict[tuple[calendars.Calendared, ZoneInfo, datetime], datetime | None] = {}

    def __call__(
        self, timetable: calendars.Calendared, zone: ZoneInfo, after: datetime
    ) -> datetime | None:
        key = (timetable, zone, after)
        if key in self._found:
            return self._found[key]
        found = self._found[key] = timetable.next_after(after, zone)
        return found


def due_occurrences(
    next_after: NextAfter,
    timetable: calendars.Calendared,
    zone: ZoneInfo,
    first: datetime,
    now: datetime,
    limit: int,
) -> tuple[list[datetime], datetime | None, bool]:
    """Occurrences from ``first`` (due) up to ``now``, at most ``limit``; the first one
    after ``now`` (None when cut short, or when the calendar ended); whether the list is
    complete."""
    found = [first]
    while len(found) < limit:
        following = next_after(timetable, zone, found[-1])
        if following is None or following > now:
            return found, following, True
        found.append(following)
    return found, None, False


def plan(due: Due, compiled: Compiled, chunk: int, next_after: NextAfter) -> Planned:
    """Misfire decisions and the next run of one schedule, at most ``chunk`` occurrences
    settled (overlap comes later)."""
    definition = compiled.definition
    timetable: calendars.Calendared
    if compiled.delay is not None:
        grid = occurrences.FixedRate(compiled.delay, anchor=due.next_run_at)
        timetable = calendars.Calendared(grid, compiled.calendar)
    else:
        assert compiled.timetable is not None
        timetable = compiled.timetable
    first = due.next_run_at
    if not timetable.calendar.empty:
        # FixedDelay's due time (a job's end + every) may fall where the calendar excludes.
        kept = next_after(timetable, compiled.zone, first - _TICK)
        if kept is None or kept > due.now:
            return Planned(computed=1, fire=(), misfired=0, next_run_at=kept, backlog=False)
        first = kept
    keep = policies.retained(definition.misfire_policy, definition.catch_up_limit)
    found, following, complete = due_occurrences(
        next_after, timetable, compiled.zone, first, due.now, chunk + keep
    )
    decision = policies.decide_misfire(
        found,
        complete=complete,
        now=due.now,
        policy=definition.misfire_policy,
        catch_up_limit=definition.catch_up_limit,
        starting_deadline_seconds=definition.starting_deadline_seconds,
        missed_before=due.missed_before,
    )
    fire, skipped = decision.fire, decision.skipped
    if compiled.delay is not None and len(fire) > 1:
        # FixedDelay: one job at a time, the next run follows its end.
        fire, skipped = fire[-1:], skipped + len(fire) - 1
    next_run_at: datetime | None
    if decision.settled < len(found):
        next_run_at = found[decision.settled]
    elif complete:
        next_run_at = following
    else:
        next_run_at = next_after(timetable, compiled.zone, found[-1])
    return Planned(
        computed=len(found),
        fire=fire,
        misfired=skipped,
        next_run_at=next_run_at,
        backlog=next_run_at is not None and next_run_at <= due.now,
    )


def advanced_runs(
    due: Due, compiled: Compiled, next_run_at: datetime | None, fired: bool, created: bool
) -> tuple[datetime | None, datetime | None]:
    """The schedule's next run and ``missed_before`` once its jobs are in: a FixedDelay one
    that fired waits for its job to finish (None), unless its occurrence had a job already;
    ``missed_before`` is kept only while the next run is still before it."""
    if compiled.delay is not None and fired:
        next_run_at = None if created else due.now + compiled.delay
    missed_before = due.missed_before
    if next_run_at is None or (missed_before is not None and next_run_at >= missed_before):
        missed_before = None
    return next_run_at, missed_before
