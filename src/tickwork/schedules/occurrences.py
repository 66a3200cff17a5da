"""When a schedule fires: cron expressions, fixed-rate intervals and daylight saving.

Pure functions of their arguments: nothing here reads the clock or the database, so the
engine, the command line and the tests compute the same occurrences from the same inputs.
Every occurrence is returned as an aware UTC ``datetime``.

Cron expressions are evaluated as wall-clock times in the schedule's IANA zone, then mapped
to instants by the daylight-saving rules of the design:

* A wall time the clock skips (spring forward) fires once, at the instant the clock jumps
  past it: New York's 02:30 on 2026-03-08 fires at 03:00 EDT (07:00Z).
* A wall time the clock repeats (fall back) fires once, at its first instance.
* When the hour field is written ``*`` the expression means "every hour", and it fires at
  every instant whose wall-clock reading matches: both 01:30 EDT and 01:30 EST on the
  fall-back night, and nothing for the skipped 02:30 on the spring-forward night. Only a
  literal ``*`` counts: ``*/2``, ``0-23`` and ``H`` name hours of the day and follow the two
  rules above, just as cron's rule for the two day fields looks at a written ``*``.

The first two rules are one: for each matching wall time, a fixed-hour expression fires at
the first instant whose clock reading reaches it. Instants that coincide (several list
items, or two wall times mapped to one transition instant) make one occurrence.

The day fields also take Quartz's ``L``, ``W`` and ``#`` (see ``cron_days``); the rules
above apply to the days they pick like to any other. A ``CRON_TZ=`` or ``TZ=`` prefix is
refused, as Kubernetes' CronJob refuses it: the zone is the schedule's ``timeZone``.

The cron grammar is parsed here rather than by croniter: the ``H`` derivation must be a
documented, portable one, every error must name its field, and croniter 7 reads a range
with equal ends (``5-5``) as the whole field. Fields are kept as bit masks, and the days of
a month are computed at once, so that ``next_after`` costs a few microseconds.
"""

from __future__ import annotations

import calendar
import functools
import hashlib
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from typing import TypeAlias
from zoneinfo import ZoneInfo, available_timezones

from tickwork.errors import TickworkError
from tickwork.schedules import cron_days, limits

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
"""The default fixed-rate anchor: every process derives the same occurrences from it."""

MIN_INTERVAL = timedelta(seconds=1)
"""The shortest fixed-rate interval: like cron, a schedule fires at most once a second."""


class InvalidExpression(TickworkError, ValueError):
    """A cron expression, duration or time zone that cannot be used; ``str()`` says why."""


# -- time zones and durations -------------------------------------------------------------


@functools.cache
def _zone_names() -> frozenset[str]:
    # "localtime" is the host's own zone, not an IANA name: it would differ per machine.
    return frozenset(available_timezones() - {"localtime"})


@functools.cache
def load_zone(name: str) -> ZoneInfo:
    """The IANA zone ``name`` (``Europe/Berlin``); anything else raises InvalidExpression."""
    if name not in _zone_names():
        raise InvalidExpression(
            f"unknown time zone {name!r} (expected an IANA name like 'Europe/Berlin')"
        )
    return ZoneInfo(name)


_UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_DURATION = re.compile(r"(?:[0-9]+(?:\.[0-9]+)?[dhms])+")
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)([dhms])")


_SPOKEN_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*([a-z]+)")
_UNIT_WORDS = {
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), "s"),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), "m"),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), "h"),
    **dict.fromkeys(("d", "day", "days"), "d"),
}


def interval_in(expression: str) -> str | None:
    """The duration of an expression written as an interval rather than a cron expression
    (``every 30s``, ``30s``, ``every 5 minutes`` give ``30s``, ``30s``, ``5m``), else None:
    for the error that points to ``@every`` (or ``spec.every``)."""
    text = re.sub(r"^@?every\s*", "", expression.strip().lower())
    if _DURATION.fullmatch(text):
        return text
    spoken = _SPOKEN_DURATION.fullmatch(text)
    if spoken and spoken[2] in _UNIT_WORDS:
        return spoken[1] + _UNIT_WORDS[spoken[2]]
    return None


def parse_duration(text: str) -> timedelta:
    """Read ``30s``, ``5m``, ``1h30m``, ``1.5h`` or ``2d``: numbers with units ``d h m s``.

    Units appear at most once, largest first; a number may have a decimal fraction. The
    result is at least one second, at most ``limits.MAX_EVERY`` (366 days) and exact to the
    microsecond, or InvalidExpression.
    """
    if len(text) > limits.MAX_EVERY_LENGTH:
        shown = f"{text[:20]!r}..."
        reason = f"longer than {limits.MAX_EVERY_LENGTH} characters"
        raise InvalidExpression(f"invalid duration {shown}: {reason}")
    if not _DURATION.fullmatch(text):
        raise InvalidExpression(
            f"invalid duration {text!r}: expected numbers with units d, h, m, s, like 30s or 1h30m"
        )
    parts = _DURATION_PART.findall(text)
    units = [unit for _, unit in parts]
    if units != sorted(set(units), key="dhms".index):
        raise InvalidExpression(f"invalid duration {text!r}: give each unit once, in order d h m s")
    seconds = sum((Fraction(number) * _UNIT_SECONDS[unit] for number, unit in parts), Fraction())
    if (seconds * 1_000_000).denominator != 1:
        raise InvalidExpression(f"invalid duration {text!r}: finer than a microsecond")
    if seconds < 1:
        raise InvalidExpression(f"invalid duration {text!r}: must be at least 1s")
    if seconds > limits.MAX_DURATION_SECONDS:
        most = f"{limits.MAX_DURATION_SECONDS // 86_400}d"
        raise InvalidExpression(f"invalid duration {text!r}: too long, at most {most}")
    return timedelta(microseconds=int(seconds * 1_000_000))


# -- cron fields ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    cycle_high: int  # where ``*`` and ``n/step`` end: 6 for day-of-week, whose 7 is Sunday again
    hash_low: int
    hash_high: int  # day-of-month hashes into 1-28, which every month has
    names: dict[str, int] = field(default_factory=dict)


_MONTH_NAMES = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
_DAY_NAMES = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]

# Canonical order; a 5-field expression has no seconds field and fires at second 0.
_SECONDS = _Field("second", 0, 59, 59, 0, 59)
_MINUTES = _Field("minute", 0, 59, 59, 0, 59)
_HOURS = _Field("hour", 0, 23, 23, 0, 23)
_DAYS = _Field("day-of-month", 1, 31, 31, 1, 28)
_MONTHS = _Field("month", 1, 12, 12, 1, 12, {n: i + 1 for i, n in enumerate(_MONTH_NAMES)})
_WEEKDAYS = _Field("day-of-week", 0, 7, 6, 0, 6, {n: i for i, n in enumerate(_DAY_NAMES)})
_FIELDS = (_SECONDS, _MINUTES, _HOURS, _DAYS, _MONTHS, _WEEKDAYS)

_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

_ITEM = re.compile(r"(?P<start>\*|\?|\w+)(?:-(?P<end>\w+))?(?:/(?P<step>\d+))?", re.ASCII)
_HASHED = re.compile(
    r"H(?:\((?P<start>\w+)-(?P<end>\w+)\))?(?:/(?P<step>\d+))?", re.ASCII | re.IGNORECASE
)
_ZONE_PREFIX = re.compile(r"(?:CRON_)?TZ=", re.IGNORECASE)
_MONTH_LENGTHS = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # February at its longest


def hashed_value(seed: str, field_name: str) -> int:
    """The number behind every ``H`` in one field of one schedule.

    ``int.from_bytes(sha256(f"{seed}/{field_name}".encode("utf-8")).digest()[:8], "big")``,
    with ``seed`` the schedule's ``namespace/name`` and ``field_name`` one of ``second``,
    ``minute``, ``hour``, ``day-of-month``, ``month``, ``day-of-week``. With ``v`` this value
    and ``lo-hi`` the range (given as ``H(lo-hi)``, else the field's own range, except
    day-of-month 1-28 and day-of-week 0-6):

    * ``H`` is ``lo + v % (hi - lo + 1)``;
    * ``H/n`` is ``lo + v % n``, then every ``n`` up to ``hi`` (``n`` at most the range size).

    Any runtime can reproduce it; it never depends on the process or on the 5- or 6-field form.
    """
    digest = hashlib.sha256(f"{seed}/{field_name}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def _span(start: int, end: int, step: int) -> int:
    mask = 0
    for value in range(start, end + 1, step):
        mask |= 1 << value
    return mask


def _value(text: str, spec: _Field) -> int:
    if text.isdigit():
        value = int(text)
    elif text.upper() in spec.names:
        value = spec.names[text.upper()]
    else:
        raise InvalidExpression(f"{spec.name} field: {text!r} is not a number or a name")
    if not spec.low <= value <= spec.high:
        raise InvalidExpression(
            f"{spec.name} field: {value} is out of range {spec.low}-{spec.high}"
        )
    return value


def _bounds(start: str, end: str, spec: _Field) -> tuple[int, int]:
    low, high = _value(start, spec), _value(end, spec)
    if low > high:
        raise InvalidExpression(f"{spec.name} field: range {start}-{end} runs backwards")
    return low, high


def _step(text: str | None, spec: _Field) -> int:
    step = int(text) if text is not None else 1
    if step < 1:
        raise InvalidExpression(f"{spec.name} field: step must be at least 1")
    return step


def _item_mask(item: str, spec: _Field, seed: str) -> int:
    if not item:
        raise InvalidExpression(f"{spec.name} field: empty list item")
    if hashed := _HASHED.fullmatch(item):
        low, high = spec.hash_low, spec.hash_high
        if hashed["start"] is not None:
            low, high = _bounds(hashed["start"], hashed["end"], spec)
        value = hashed_value(seed, spec.name)
        if hashed["step"] is None:
            return 1 << (low + value % (high - low + 1))
        step = _step(hashed["step"], spec)
        if step > high - low + 1:
            raise InvalidExpression(
                f"{spec.name} field: step {step} is larger than the range {low}-{high}"
            )
        return _span(low + value % step, high, step)
    parsed = _ITEM.fullmatch(item)
    if parsed is None:
        raise InvalidExpression(f"{spec.name} field: cannot read {item!r}")
    start, end, step_text = parsed["start"], parsed["end"], parsed["step"]
    if start == "?" and (item != "?" or not (spec is _DAYS or spec is _WEEKDAYS)):
        raise InvalidExpression(
            f"{spec.name} field: '?' stands alone, in day-of-month or day-of-week"
        )
    if start in ("*", "?"):
        if end is not None:
            raise InvalidExpression(f"{spec.name} field: cannot read {item!r}")
        low, high = spec.low, spec.cycle_high
    elif end is not None:
        low, high = _bounds(start, end, spec)
    else:
        low = _value(start, spec)
        high = spec.cycle_high if step_text is not None else low
    return _span(low, high, _step(step_text, spec))


def _field_mask(text: str, spec: _Field, seed: str) -> int:
    mask = 0
    for item in text.split(","):
        mask |= _item_mask(item, spec, seed)
    return mask


_DATE_SPECIAL = re.compile(
    r"(?P<lw>LW)|L(?:-(?P<before>\d+))?|(?P<nearest>\d+)W", re.ASCII | re.IGNORECASE
)
_WEEKDAY_SPECIAL = re.compile(r"(?P<weekday>\w+?)(?:L|#(?P<nth>\d+))", re.ASCII | re.IGNORECASE)
_DATE_SPECIALS = "L, L-n, nW and LW are list items of their own, without ranges or steps"
_WEEKDAY_SPECIALS = (
    "nL (5L: the last Friday) and n#k (5#3: the third Friday) are list items of their own, "
    "without ranges or steps"
)


def _date_items(text: str, seed: str) -> tuple[int, frozenset[int], frozenset[int], bool]:
    """The day-of-month field: plain days, ``L-n`` as n, ``nW`` as n, whether ``LW``."""
    dates, last_weekday = 0, False
    before_last: set[int] = set()
    nearest: set[int] = set()
    for item in text.split(","):
        special = _DATE_SPECIAL.fullmatch(item)
        if special is None:
            if "L" in item.upper() or "W" in item.upper():
                raise InvalidExpression(
                    f"day-of-month field: cannot read {item!r}: {_DATE_SPECIALS}"
                )
            dates |= _item_mask(item, _DAYS, seed)
        elif special["lw"]:
            last_weekday = True
        elif special["nearest"] is not None:
            nearest.add(_value(special["nearest"], _DAYS))
        else:
            before = int(special["before"] or 0)
            if before > 30:
                raise InvalidExpression(f"day-of-month field: {item!r}: n in L-n is at most 30")
            before_last.add(before)
    return dates, frozenset(before_last), frozenset(nearest), last_weekday


def _weekday_items(text: str, seed: str) -> tuple[int, frozenset[tuple[int, int]], int]:
    """The day-of-week field: plain weekdays, ``n#k`` as (n, k), ``nL`` as weekday bits."""
    weekdays, last_of = 0, 0
    nth: set[tuple[int, int]] = set()
    for item in text.split(","):
        special = _WEEKDAY_SPECIAL.fullmatch(item)
        if special is None:
            if "L" in item.upper() or "#" in item:
                raise InvalidExpression(
                    f"day-of-week field: cannot read {item!r}: {_WEEKDAY_SPECIALS}"
                )
            weekdays |= _item_mask(item, _WEEKDAYS, seed)
            continue
        weekday = _value(special["weekday"], _WEEKDAYS) % 7  # 7 is Sunday, like 0
        if special["nth"] is None:
            last_of |= 1 << weekday
        elif 1 <= int(special["nth"]) <= 5:
            nth.add((weekday, int(special["nth"])))
        else:
            raise InvalidExpression(f"day-of-week field: {item!r}: k in n#k is 1-5")
    if weekdays & (1 << 7):
        weekdays = (weekdays & cron_days.ALL_WEEKDAYS) | 1  # 7 is Sunday, like 0
    return weekdays, frozenset(nth), last_of


def _next_member(mask: int, value: int) -> int:
    """The smallest member of ``mask`` that is >= ``value``, or -1."""
    rest = mask >> value
    if not rest:
        return -1
    return value + (rest & -rest).bit_length() - 1


def _to_utc(moment: datetime) -> datetime:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{moment.isoformat()} has no time zone; pass an aware datetime")
    return moment.astimezone(UTC)


def _at(wall: datetime, offset: timedelta) -> datetime:
    """The UTC instant at which a clock running at ``offset`` reads ``wall`` (naive)."""
    return (wall - offset).replace(tzinfo=UTC)


def _offset(moment: datetime) -> timedelta:
    offset = moment.utcoffset()
    assert offset is not None  # every datetime here is aware
    return offset


def _offsets(wall: datetime, tz: ZoneInfo) -> tuple[timedelta, timedelta]:
    """The UTC offsets for naive ``wall`` before and after a transition (PEP 495 fold 0, 1).

    Equal: ``wall`` happens once. First larger: the clock repeats it (fall back). First
    smaller: the clock skips it (spring forward).
    """
    before, after = tz.utcoffset(wall), tz.utcoffset(wall.replace(fold=1))
    assert before is not None and after is not None  # a ZoneInfo always has an offset
    return before, after


def transition(tz: ZoneInfo, before: datetime, after: datetime) -> datetime:
    """The instant in (before, after] at which ``tz`` switches to the UTC offset of ``after``.

    Bisects over whole seconds, on which zone transitions fall. Callers bracket one skipped
    or repeated stretch, a few hours at most, so exactly one transition lies between.
    """
    target = _offset(after.astimezone(tz))
    low, high = math.floor(before.timestamp()), math.ceil(after.timestamp())
    while high - low > 1:
        middle = (low + high) // 2
        if _offset(datetime.fromtimestamp(middle, tz)) == target:
            high = middle
        else:
            low = middle
    return datetime.fromtimestamp(high, UTC)


# -- timetables -----------------------------------------------------------------------------


@dataclass(frozen=True)
class CronTimetable:
    """A parsed cron expression; each field is a bit mask of the values it allows."""

    expression: str
    seconds: int
    minutes: int
    hours: int
    months: int
    days: cron_days.Days
    """The two day fields, evaluated month by month."""
    hour_wildcard: bool
    """The hour field is written ``*``: fire at every real hour, see the module docstring."""

    @classmethod
    def parse(cls, expr: str, *, seed: str = "") -> CronTimetable:
        """Parse 5 fields, 6 with seconds first, or a macro; ``seed`` feeds ``H`` fields.

        Raises InvalidExpression naming the offending field. Results are cached, so callers
        may parse on every use.
        """
        return _parse(expr, seed if "H" in expr.upper() else "")

    def next_after(self, after: datetime, tz: ZoneInfo) -> datetime:
        """The first occurrence strictly after ``after``, in UTC; wall times are read in ``tz``."""
        instant = _to_utc(after)
        local = instant.astimezone(tz)
        if self.hour_wildcard:
            return self._next_reading(instant, local, tz)
        return self._next_wall_time(instant, local, tz)

    def _next_wall_time(self, instant: datetime, local: datetime, tz: ZoneInfo) -> datetime:
        # Each matching wall time fires at the first instant whose clock reading reaches it.
        if local.fold:
            # Second pass of a repeated stretch, whose wall times all fired on the first
            # pass: resume from the reading the clock had reached before it fell back.
            first_pass = local.replace(fold=0)
            wall = self._first_match(transition(tz, first_pass, instant) + _offset(first_pass))
        else:
            wall = self._first_match(local, strictly_after=True)
        before, after = _offsets(wall, tz)
        if before >= after:
            return _at(wall, before)
        return transition(tz, _at(wall, after), _at(wall, before))

    def _next_reading(self, instant: datetime, local: datetime, tz: ZoneInfo) -> datetime:
        # Every instant whose clock reading matches fires; a skipped reading has no instant.
        wall = self._first_match(local, strictly_after=True)
        before, after = _offsets(wall, tz)
        while before < after:
            landing = transition(tz, _at(wall, after), _at(wall, before)) + after
            wall = self._first_match(landing)
            before, after = _offsets(wall, tz)
        found = _at(wall, before)
        if found <= instant:  # ``wall`` repeats and ``instant`` is past its first pass
            found = _at(wall, after)
        replay = local.replace(fold=1)
        if not local.fold and _offset(replay) != _offset(local):
            # The clock is about to fall back and replay readings up to this one: the replay
            # of the earliest matching reading may come before ``found``.
            wall = self._first_match(transition(tz, instant, replay) + _offset(replay))
            if wall <= local.replace(tzinfo=None):
                found = min(found, _at(wall, _offset(replay)))
        return found

    def _first_match(self, start: datetime, *, strictly_after: bool = False) -> datetime:
        """The first matching wall time from ``start``'s whole second (or the next), naive.

        Reads only the date and time fields of ``start``, never its zone.
        """
        year, month, day = start.year, start.month, start.day
        hour, minute, second = start.hour, start.minute, start.second + strictly_after
        # parse() guarantees a match within the 400-year Gregorian cycle; within 8 years
        # (29 February) unless a 5th weekday of February is asked for (every 28 years, 40
        # across 2100).
        give_up = year + 400
        level = 0  # the first field not yet known to match: month, day, hour, minute, second
        while year < give_up:
            if level == 0:
                found = _next_member(self.months, month)
                if found < 0:
                    year, month, day, hour, minute, second = year + 1, 1, 1, 0, 0, 0
                    continue
                if found != month:
                    month, day, hour, minute, second = found, 1, 0, 0, 0
                level = 1
            if level == 1:
                found = self._next_day(year, month, day)
                if found < 0:
                    month, day, hour, minute, second, level = month + 1, 1, 0, 0, 0, 0
                    continue
                if found != day:
                    day, hour, minute, second = found, 0, 0, 0
                level = 2
            if level == 2:
                found = _next_member(self.hours, hour)
                if found < 0:
                    day, hour, minute, second, level = day + 1, 0, 0, 0, 1
                    continue
                if found != hour:
                    hour, minute, second = found, 0, 0
                level = 3
            if level == 3:
                found = _next_member(self.minutes, minute)
                if found < 0:
                    hour, minute, second, level = hour + 1, 0, 0, 2
                    continue
                if found != minute:
                    minute, second = found, 0
                level = 4
            found = _next_member(self.seconds, second)
            if found < 0:
                minute, second, level = minute + 1, 0, 3
                continue
            return datetime(year, month, day, hour, minute, found)
        raise AssertionError(f"{self.expression!r} has no occurrence within 400 years")

    def _next_day(self, year: int, month: int, day: int) -> int:
        """The first matching day of the month at or after ``day``, or -1."""
        first, length = calendar.monthrange(year, month)  # Monday is 0, Sunday for cron
        return _next_member(self.days.matching(length, (first + 1) % 7), day)


@functools.lru_cache(maxsize=65536)
def _parse(expr: str, seed: str) -> CronTimetable:
    text = expr.strip()
    if _ZONE_PREFIX.match(text):
        raise InvalidExpression(
            f"CRON_TZ or TZ used in {expr!r} is not supported: give the zone as spec.timeZone "
            "instead (--timezone for tickwork preview)"
        )
    if text.startswith("@"):
        if text.lower() == "@reboot":
            raise InvalidExpression("@reboot is not supported: a schedule needs a time")
        if text.lower() not in _MACROS:
            known = " ".join(_MACROS)
            raise InvalidExpression(f"unknown macro {text!r} (known: {known})")
        text = _MACROS[text.lower()]
    fields = text.split()
    if len(fields) == 5:
        fields.insert(0, "0")
    elif len(fields) != 6:
        raise InvalidExpression(
            f"expected 5 fields, or 6 with seconds first; got {len(fields)} in {expr!r}"
        )
    seconds, minutes, hours = (
        _field_mask(part, spec, seed) for part, spec in zip(fields[:3], _FIELDS[:3], strict=True)
    )
    dates, before_last, nearest, last_weekday = _date_items(fields[3], seed)
    months = _field_mask(fields[4], _MONTHS, seed)
    weekdays, nth, last_of = _weekday_items(fields[5], seed)
    days_star, weekdays_star = fields[3] in ("*", "?"), fields[5] in ("*", "?")
    days = cron_days.Days(
        dates=dates,
        weekdays=weekdays,
        either=not (days_star or weekdays_star),
        before_last=before_last,
        nearest=nearest,
        last_weekday=last_weekday,
        nth=nth,
        last_of=last_of,
    )
    if weekdays_star and not days_star:
        _check_dates_occur(days, months, fields[3], fields[4])
    return CronTimetable(
        expression=expr,
        seconds=seconds,
        minutes=minutes,
        hours=hours,
        months=months,
        days=days,
        hour_wildcard=fields[2] == "*",
    )


def _check_dates_occur(days: cron_days.Days, months: int, text: str, month_text: str) -> None:
    """Refuse a day-of-month field (the day-of-week one being ``*``) no allowed month has."""
    allowed = [m for m in range(1, 13) if months >> m & 1]
    if not days.special:
        first_day = _next_member(days.dates, 1)
        if first_day > max(_MONTH_LENGTHS[m] for m in allowed):
            raise InvalidExpression(
                f"day-of-month field: day {first_day} never occurs in month {month_text!r}"
            )
        return
    # Every length a month has, starting on every weekday, comes within 400 years.
    lengths = {_MONTH_LENGTHS[m] for m in allowed} | ({28} if 2 in allowed else set())
    if not any(days.matching(n, first) for n in lengths for first in range(7)):
        raise InvalidExpression(
            f"day-of-month field: {text!r} never occurs in month {month_text!r}"
        )


@dataclass(frozen=True)
class FixedRate:
    """Occurrences at ``anchor + k * every`` in absolute time, whatever the zone."""

    every: timedelta
    anchor: datetime = EPOCH

    def __post_init__(self) -> None:
        if self.every < MIN_INTERVAL:
            seconds = self.every.total_seconds()
            raise InvalidExpression(f"interval must be at least 1s, got {seconds:g}s")
        _to_utc(self.anchor)  # refuses a naive anchor

    def next_after(self, after: datetime, tz: ZoneInfo) -> datetime:
        """The first ``anchor + k * every`` strictly after ``after``, in UTC; ``tz`` is unused."""
        steps = (_to_utc(after) - self.anchor) // self.every + 1
        return (self.anchor + steps * self.every).astimezone(UTC)


Timetable: TypeAlias = CronTimetable | FixedRate


def occurrences_between(
    timetable: Timetable,
    start_exclusive: datetime,
    end_inclusive: datetime,
    tz: ZoneInfo,
    *,
    limit: int,
) -> list[datetime]:
    """Occurrences in (start_exclusive, end_inclusive], ascending, in UTC, at most ``limit``."""
    end = _to_utc(end_inclusive)
    found: list[datetime] = []
    moment = start_exclusive
    while len(found) < limit:
        moment = timetable.next_after(moment, tz)
        if moment > end:
            break
        found.append(moment)
    return found


def parse_expression(expression: str, *, seed: str = "") -> Timetable:
    """A cron expression, or ``@every <duration>`` for a fixed rate (what ``tickwork preview``
    reads); an interval written for a cron expression points to ``@every``."""
    keyword, _, rest = expression.strip().partition(" ")
    if keyword == "@every":
        return FixedRate(parse_duration(rest.strip()))
    if (meant := interval_in(expression)) is not None:
        raise InvalidExpression(
            f"{expression!r} is not a cron expression; did you mean `@every {meant}`?"
        )
    return CronTimetable.parse(expression, seed=seed)
