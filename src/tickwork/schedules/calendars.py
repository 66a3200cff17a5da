"""Calendars: which occurrences of a timetable a schedule keeps (pure).

A schedule's ``spec.exclude`` (ISO dates and cron expressions), ``spec.startTime`` and
``spec.endTime`` make its :class:`Calendar`; :class:`Calendared` applies it to the schedule's
timetable. Its ``next_after`` is the one every caller asks (firing and catch-up, sync, the
single fire, backfill, ``tickwork preview``, the console and the operator's status), so they
all keep and skip the same occurrences. The rules (docs/calendars.md):

* An ISO date (``2026-12-25``) excludes every occurrence whose local date, in the schedule's
  ``timeZone``, is that day.
* A cron expression excludes every occurrence whose local clock reading lies in a minute it
  names (5 fields) or a second it names (6 fields, seconds first): ``* * * * 0,6`` excludes
  Saturdays and Sundays, ``* 9-17 * * 1-5`` office hours, ``0 12 * * *`` the minute 12:00.
  Macros (``@daily``, ...) name instants rather than stretches and are refused; ``H`` fields
  hash like the schedule's own.
* The reading is the clock's at the instant the occurrence fires, after the daylight-saving
  rules of :mod:`tickwork.schedules.occurrences` placed it: New York's 02:30 on a
  spring-forward night fires at 03:00, so ``* 3 * * *`` excludes it and ``* 2 * * *`` does not.
  An excluded occurrence is dropped, never moved.
* ``startTime`` and ``endTime`` are instants (RFC 3339, with an offset); occurrences before
  ``startTime`` or after ``endTime`` do not exist (both ends included). After ``endTime`` a
  schedule has no next run: it has ended.

A search skips a whole excluded minute, hour or day at a time (the largest stretch an
exclusion removes of the schedule's occurrences, :meth:`Exclusion.unit_for`), never past a
change of the zone's offset, and looks at most at :data:`limits.MAX_EXCLUSION_SEARCH`
candidates: validation refuses a calendar that leaves no occurrence within that, or within
:data:`SEARCH_YEARS` years. (A zone changing its offset and back within one skipped stretch,
which no current zone does within a day, would be skipped whole.)
"""

from __future__ import annotations

import calendar
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from tickwork.schedules import cron_days, limits, occurrences

SEARCH_YEARS = 10
"""Validation looks this far for a kept occurrence (the first after ``startTime``, or after
the last excluded date)."""

RUNTIME_YEARS = 400
"""Firing looks this far for the next kept occurrence (the Gregorian cycle, over which cron
fields repeat) before it sets the schedule aside with an error."""

REFERENCE = datetime(2000, 1, 1, tzinfo=UTC)
"""Where validation starts without ``startTime`` or dates: cron exclusions repeat, so any
instant does."""

_TICK = timedelta(microseconds=1)
_SECOND, _MINUTE, _HOUR, _DAY = range(4)
_UNITS = (timedelta(seconds=1), timedelta(minutes=1), timedelta(hours=1), timedelta(days=1))
_ALL_60 = (1 << 60) - 1
_ALL_24 = (1 << 24) - 1
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", re.ASCII)


class CalendarError(occurrences.InvalidExpression):
    """An unusable calendar; ``field`` names the spec field (``spec.exclude[2]``)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(reason)
        self.field = field


@dataclass(frozen=True)
class Exclusion:
    """One cron expression of ``spec.exclude``, as the stretches of local time it names."""

    timetable: occurrences.CronTimetable
    unit: int
    """The largest stretch it excludes whole: a second, minute, hour or day (0-3)."""

    @classmethod
    def parse(cls, text: str, seed: str) -> Exclusion:
        """Read 5 fields (whole minutes) or 6 (seconds first); macros are refused."""
        fields = text.split()
        if text.strip().startswith("@"):
            raise occurrences.InvalidExpression(
                f"{text!r}: a macro names an instant, not a stretch of time; write the fields "
                "(for example '* * * * 0,6' for weekends)"
            )
        if len(fields) == 5:
            fields.insert(0, "*")  # every second of the minutes named
        elif len(fields) != 6:
            raise occurrences.InvalidExpression(
                f"expected a date (YYYY-MM-DD) or a cron expression of 5 fields (6 with "
                f"seconds first); got {len(fields)} fields in {text!r}"
            )
        timetable = occurrences.CronTimetable.parse(" ".join(fields), seed=seed)
        unit = _SECOND
        if timetable.seconds == _ALL_60:
            unit = _MINUTE
            if timetable.minutes == _ALL_60:
                unit = _HOUR if timetable.hours != _ALL_24 else _DAY
        return cls(timetable, unit)

    def unit_for(self, grid: occurrences.Timetable) -> int:
        """The largest stretch this expression removes whole *of ``grid``'s occurrences*:
        when its seconds (minutes, hours) hold every second (minute, hour) the cron ``grid``
        fires at, an excluded occurrence's whole minute (hour, day) is excluded for it. Where
        the clock runs steadily (a stretch ends at an offset change) a cron grid's readings
        are its own fields, so nothing kept is skipped; ``0 * * * * 1-5`` leaves out whole
        weekdays of a ``* * * * *`` schedule, one jump each, not one per minute."""
        if not isinstance(grid, occurrences.CronTimetable):
            return self.unit
        table, unit = self.timetable, _SECOND
        for mine, theirs in (
            (table.seconds, grid.seconds),
            (table.minutes, grid.minutes),
            (table.hours, grid.hours),
        ):
            if theirs & ~mine:
                break
            unit += 1
        return max(unit, self.unit)

    def matches(self, local: datetime) -> bool:
        """Whether the clock reading ``local`` lies in a stretch this expression names."""
        table = self.timetable
        if not (
            table.months >> local.month & 1
            and table.hours >> local.hour & 1
            and table.minutes >> local.minute & 1
            and table.seconds >> local.second & 1
        ):
            return False
        return bool(_month_days(table.days, local.year, local.month) >> local.day & 1)


@functools.lru_cache(maxsize=4096)
def _month_days(days: cron_days.Days, year: int, month: int) -> int:
    first, length = calendar.monthrange(year, month)  # Monday is 0, Sunday for cron
    return days.matching(length, (first + 1) % 7)


@dataclass(frozen=True)
class Calendar:
    """The occurrences a schedule keeps: not on ``dates``, not matched by ``crons``, and
    within ``start``..``end`` (both included, either open)."""

    dates: frozenset[date] = frozenset()
    crons: tuple[Exclusion, ...] = ()
    start: datetime | None = None
    end: datetime | None = None

    @classmethod
    def parse(
        cls,
        exclude: Sequence[str] = (),
        start: datetime | None = None,
        end: datetime | None = None,
        *,
        seed: str = "",
    ) -> Calendar:
        """Read ``spec.exclude``'s items; raises CalendarError naming the item's field."""
        if len(exclude) > limits.MAX_EXCLUSIONS:
            raise CalendarError(
                "spec.exclude", f"has {len(exclude)} items, at most {limits.MAX_EXCLUSIONS}"
            )
        dates: set[date] = set()
        crons: list[Exclusion] = []
        for index, item in enumerate(exclude):
            field = f"spec.exclude[{index}]"
            if not isinstance(item, str):
                raise CalendarError(field, f"must be a string, not {type(item).__name__}")
            if not item.strip() or len(item) > limits.MAX_EXCLUSION_LENGTH:
                reason = f"must be 1 to {limits.MAX_EXCLUSION_LENGTH} characters, not blank"
                raise CalendarError(field, reason)
            try:
                if _DATE.fullmatch(item):
                    dates.add(parse_date(item))
                else:
                    crons.append(Exclusion.parse(item, seed))
            except occurrences.InvalidExpression as error:
                raise CalendarError(field, str(error)) from None
            if len(crons) > limits.MAX_CRON_EXCLUSIONS:
                reason = f"more than {limits.MAX_CRON_EXCLUSIONS} cron expressions in spec.exclude"
                raise CalendarError(field, reason)
        for field, value in (("spec.startTime", start), ("spec.endTime", end)):
            if value is not None:
                check_instant(field, value)
        if start is not None and end is not None and end <= start:
            raise CalendarError(
                "spec.endTime",
                f"must be after spec.startTime ({start.isoformat()}), not {end.isoformat()}",
            )
        return cls(frozenset(dates), tuple(dict.fromkeys(crons)), start, end)

    @functools.cached_property
    def empty(self) -> bool:
        """Whether it keeps every occurrence (asked on every firing: computed once)."""
        return not self.dates and not self.crons and self.start is None and self.end is None

    def excluded_until(
        self, instant: datetime, tz: ZoneInfo, units: Sequence[int]
    ) -> datetime | None:
        """None when ``instant`` is kept by the exclusions; else the instant at which the
        excluded stretch around it ends (every occurrence in between is excluded too).
        ``units``: the stretch each cron exclusion removes whole (:meth:`Exclusion.unit_for`)."""
        local = instant.astimezone(tz)
        unit = _DAY if local.date() in self.dates else -1
        for exclusion, whole in zip(self.crons, units, strict=True):
            if whole > unit and exclusion.matches(local):
                unit = whole
        if unit < 0:
            return None
        return _stretch_end(instant, local, unit, tz)


NO_CALENDAR = Calendar()
"""Every occurrence kept."""


def _stretch_end(instant: datetime, local: datetime, unit: int, tz: ZoneInfo) -> datetime:
    """The first instant after ``instant`` whose reading leaves the unit (second, minute,
    hour, day) ``local`` reads, or at which the zone's offset changes, whichever is first:
    up to there the clock runs steadily inside the unit."""
    wall = local.replace(tzinfo=None)
    start = wall.replace(microsecond=0)
    if unit >= _MINUTE:
        start = start.replace(second=0)
    if unit >= _HOUR:
        start = start.replace(minute=0)
    if unit >= _DAY:
        start = start.replace(hour=0)
    end = instant + (start + _UNITS[unit] - wall)
    if end.astimezone(tz).utcoffset() != local.utcoffset():
        end = min(end, occurrences.transition(tz, instant, end))
    return end


@dataclass(frozen=True)
class Calendared:
    """A timetable with its calendar: the occurrences a schedule really has."""

    timetable: occurrences.Timetable
    calendar: Calendar = NO_CALENDAR

    def __hash__(self) -> int:
        return self._hash

    @functools.cached_property
    def _hash(self) -> int:
        # Firing keys its memo of next occurrences by the timetable: hash it once.
        return hash((self.timetable, self.calendar))

    @functools.cached_property
    def _units(self) -> tuple[int, ...]:
        return tuple(exclusion.unit_for(self.timetable) for exclusion in self.calendar.crons)

    def next_after(self, after: datetime, tz: ZoneInfo) -> datetime | None:
        """The first kept occurrence strictly after ``after``, in UTC; None after ``endTime``.

        Raises CalendarError when none is found within :data:`RUNTIME_YEARS` years or
        :data:`limits.MAX_EXCLUSION_SEARCH` candidates."""
        if self.calendar.empty:
            return self.timetable.next_after(after, tz)
        horizon = after + timedelta(days=366 * RUNTIME_YEARS)
        found = self.search(after, tz, horizon)
        end = self.calendar.end
        if found is None and (end is None or end > horizon):
            raise CalendarError("spec.exclude", f"excludes every occurrence {_until(horizon)}")
        return found

    def between(
        self, start_exclusive: datetime, end_inclusive: datetime, tz: ZoneInfo, *, limit: int
    ) -> list[datetime]:
        """Kept occurrences in (start_exclusive, end_inclusive], ascending, at most ``limit``."""
        found: list[datetime] = []
        moment = start_exclusive
        while len(found) < limit:
            following = self.search(moment, tz, end_inclusive)
            if following is None:
                break
            found.append(following)
            moment = following
        return found

    def search(self, after: datetime, tz: ZoneInfo, horizon: datetime) -> datetime | None:
        """The first kept occurrence in (after, horizon], None when there is none (or the
        calendar ends first); CalendarError after :data:`limits.MAX_EXCLUSION_SEARCH`
        candidates."""
        calendar_ = self.calendar
        moment = after
        if calendar_.start is not None and moment < calendar_.start:
            moment = calendar_.start - _TICK
        for _ in range(limits.MAX_EXCLUSION_SEARCH):
            found = self.timetable.next_after(moment, tz)
            if found > horizon or (calendar_.end is not None and found > calendar_.end):
                return None
            until = calendar_.excluded_until(found, tz, self._units)
            if until is None:
                return found
            moment = until - _TICK
        raise CalendarError(
            "spec.exclude",
            f"excludes the first {limits.MAX_EXCLUSION_SEARCH:,} occurrences after "
            f"{after.isoformat()}",
        )

    def check(self, tz: ZoneInfo) -> None:
        """Refuse a calendar that leaves no occurrence (CalendarError naming the field).

        From ``startTime`` (up to ``endTime``) if set, else from after the last excluded
        date: the exclusions must keep an occurrence within :data:`SEARCH_YEARS` years."""
        calendar_ = self.calendar
        if calendar_.empty:
            return
        start = calendar_.start
        if start is None:
            start = REFERENCE
            if calendar_.dates:
                last = max(calendar_.dates) + timedelta(days=1)
                start = max(start, datetime.combine(last, time(), tz))
            # Without startTime the window is open: endTime may well be in the past.
            searched = Calendared(self.timetable, Calendar(calendar_.dates, calendar_.crons))
        else:
            searched = self
        horizon = start + timedelta(days=366 * SEARCH_YEARS)
        everything = CalendarError(
            "spec.exclude",
            f"excludes every occurrence: none is left within {SEARCH_YEARS} years (searched "
            f"from {start.date().isoformat()}, through at most "
            f"{limits.MAX_EXCLUSION_SEARCH:,} occurrences)",
        )
        try:
            found = searched.search(start - _TICK, tz, horizon)
        except CalendarError:
            raise everything from None
        if found is None:
            end = searched.calendar.end
            if end is None or end > horizon:
                raise everything
            first = self.timetable.next_after(start - _TICK, tz)
            if first <= end:
                raise CalendarError(
                    "spec.exclude",
                    "excludes every occurrence between spec.startTime and spec.endTime",
                )
            raise CalendarError(
                "spec.endTime",
                f"leaves no occurrence: the first one after spec.startTime is "
                f"{first.astimezone(tz).isoformat()}",
            )


def preview(
    expression: str,
    calendar_: Calendar = NO_CALENDAR,
    *,
    time_zone: str = "UTC",
    start: datetime,
    count: int,
    seed: str = "",
) -> list[datetime]:
    """The next ``count`` kept occurrences after ``start``, in the schedule's zone (for
    display); fewer when the calendar ends first. ``expression`` is a cron expression, or
    ``@every <duration>`` for a fixed rate."""
    zone = occurrences.load_zone(time_zone)
    timetable = Calendared(occurrences.parse_expression(expression, seed=seed), calendar_)
    found: list[datetime] = []
    moment: datetime | None = start
    while moment is not None and len(found) < count:
        moment = timetable.next_after(moment, zone)
        if moment is not None:
            found.append(moment.astimezone(zone))
    return found


def _until(horizon: datetime) -> str:
    return f"up to {horizon.date().isoformat()} (or the first {limits.MAX_EXCLUSION_SEARCH:,})"


def parse_date(text: str) -> date:
    """``YYYY-MM-DD``, a real day within the years of :data:`limits.MIN_YEAR` to ``MAX_YEAR``."""
    try:
        day = date.fromisoformat(text)
    except ValueError:
        raise occurrences.InvalidExpression(f"{text!r} is not a date (YYYY-MM-DD)") from None
    if not limits.MIN_YEAR <= day.year <= limits.MAX_YEAR:
        raise occurrences.InvalidExpression(
            f"{text!r}: the year must be {limits.MIN_YEAR} to {limits.MAX_YEAR}"
        )
    return day


def parse_instant(text: str) -> datetime:
    """An RFC 3339 instant with its offset (``2026-12-24T18:00:00+01:00``, ``...Z``); the
    caller names the field."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        value = None
    if value is None or "T" not in text.upper():
        raise occurrences.InvalidExpression(
            f"{text!r} is not an RFC 3339 time (like 2026-12-24T18:00:00+01:00)"
        )
    check_instant("", value)
    return value


def check_instant(field: str, value: datetime) -> None:
    """Refuse an instant without an offset, or outside the years allowed."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise CalendarError(
            field, f"{value.isoformat()} has no UTC offset (add Z or +HH:MM, as RFC 3339 asks)"
        )
    if not limits.MIN_YEAR <= value.astimezone(UTC).year <= limits.MAX_YEAR:
        raise CalendarError(
            field, f"{value.isoformat()}: the year must be {limits.MIN_YEAR} to {limits.MAX_YEAR}"
        )
