"""Cron's day specials: ``L``, ``L-n``, ``nW``, ``LW``, ``nL``, ``n#k``; ``CRON_TZ=`` refused.

croniter (7) is the reference in UTC where it is right; where it is not, the instants below
are worked out by hand from the 2026-2027 calendars:

* ``0 0 1 * 5#3``, both day fields restricted: cron's rule makes it the 1st *or* the third
  Friday. croniter intersects the two instead (``CroniterBadDateError: failed to find next
  date``: no 1st is a third Friday), and ``0 0 L * 5L`` the same way.
* ``0 0 15W * 1``: the weekday nearest the 15th *or* a Monday; croniter drops the Mondays
  (2026-01-05 comes after 2026-01-15 for it).
* ``0 0 31W * *``: a ``W`` day applies in months that have that day, as a plain ``31`` does;
  croniter moves it to the last day first (2026-02-27 and 2026-04-30 for it, none here).

Spellings croniter lacks are checked by hand only: ``L-n``, ``LW``, ``W`` in lists, ``nL``
(croniter writes ``Ln``), names with ``L`` (``FRIL``), ``7`` for Sunday, plain weekdays mixed
with ``#`` or ``nL`` (croniter refuses them).

Daylight saving, 2026 (2027 where a test goes on a year): Europe/Berlin CET to CEST on
Sunday 29 March at 02:00 (01:00Z), back on Sunday 25 October at 03:00 CEST (01:00Z);
America/New_York and Australia/Lord_Howe as in test_occurrences. The DST rules are the
module's own, unchanged: the specials only choose the days.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwork.schedules.calendars import preview
from tickwork.schedules.checks import DefinitionError
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.occurrences import (
    CronTimetable,
    InvalidExpression,
    load_zone,
    occurrences_between,
)
from tickwork.schedules.options import JobTemplate

UTC_ZONE = load_zone("UTC")


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def upcoming(expression: str, after: str, zone: str = "UTC", count: int = 4) -> list[str]:
    """The next ``count`` occurrences, chained, as ``YYYY-MM-DDTHH:MM:SSZ``."""
    timetable, tz = CronTimetable.parse(expression), load_zone(zone)
    moment, found = at(after), []
    for _ in range(count):
        moment = timetable.next_after(moment, tz)
        found.append(moment.strftime("%Y-%m-%dT%H:%M:%SZ"))
    return found


def days(expression: str, after: str = "2026-01-01T00:00Z", count: int = 6) -> list[str]:
    """The dates of the next ``count`` occurrences in UTC, ``MM-DD``."""
    return [t[5:10] for t in upcoming(expression, after, count=count)]


# -- day-of-month --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # L: the last day, 28 February in 2026, 29 in 2028.
        ("0 0 L * *", ["01-31", "02-28", "03-31", "04-30", "05-31", "06-30"]),
        ("0 0 l 2 *", ["02-28", "02-28", "02-29", "02-28", "02-28", "02-28"]),
        # L-n: n days before the last day; L-30 only in 31-day months.
        ("0 0 L-2 * *", ["01-29", "02-26", "03-29", "04-28", "05-29", "06-28"]),
        ("0 0 L-30 * *", ["03-01", "05-01", "07-01", "08-01", "10-01", "12-01"]),
        # nW: the weekday nearest day n, within the month. 1 August 2026 is a Saturday:
        # Monday the 3rd, not Friday 31 July. 31 May 2026 is a Sunday: Friday the 29th.
        ("0 0 1W * *", ["02-02", "03-02", "04-01", "05-01", "06-01", "07-01"]),
        ("0 0 1W 8 *", ["08-03", "08-02", "08-01", "08-01", "08-01", "08-01"]),
        ("0 0 31W * *", ["01-30", "03-31", "05-29", "07-31", "08-31", "10-30"]),
        ("0 0 15w * *", ["01-15", "02-16", "03-16", "04-15", "05-15", "06-15"]),
        # LW: the last weekday; 31 January 2026 is a Saturday, 31 May a Sunday.
        ("0 0 LW * *", ["01-30", "02-27", "03-31", "04-30", "05-29", "06-30"]),
        # Lists: the items add up, plain days, H and specials alike.
        ("0 0 1,L * *", ["01-31", "02-01", "02-28", "03-01", "03-31", "04-01"]),
        ("0 0 1W,15W * *", ["01-15", "02-02", "02-16", "03-02", "03-16", "04-01"]),
        ("0 0 L,L-1 2 *", ["02-27", "02-28", "02-27", "02-28", "02-28", "02-29"]),
        ("0 0 LW,L * *", ["01-30", "01-31", "02-27", "02-28", "03-31", "04-30"]),
    ],
)
def test_day_of_month_specials(expression: str, expected: list[str]) -> None:
    assert days(expression) == expected


def test_l_in_february_of_leap_years() -> None:
    assert upcoming("0 0 L 2 *", "2027-03-01T00:00Z", count=2) == [
        "2028-02-29T00:00:00Z",
        "2029-02-28T00:00:00Z",
    ]
    # L-28 is the 1st of a 29-day February only.
    assert [t[:10] for t in upcoming("0 0 L-28 2 *", "2026-01-01T00:00Z", count=3)] == [
        "2028-02-01",
        "2032-02-01",
        "2036-02-01",
    ]


# -- day-of-week ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # nL: the last weekday n. Names too (FRIL, fril) and 7 for Sunday, as in 7#1.
        ("0 0 * * 5L", ["01-30", "02-27", "03-27", "04-24", "05-29", "06-26"]),
        ("0 0 * * FRIL", ["01-30", "02-27", "03-27", "04-24", "05-29", "06-26"]),
        ("0 0 * * 0L", ["01-25", "02-22", "03-29", "04-26", "05-31", "06-28"]),
        ("0 0 * * 7l", ["01-25", "02-22", "03-29", "04-26", "05-31", "06-28"]),
        # n#k: the k-th weekday n; a month without a 5th one has none that month.
        ("0 0 * * 5#3", ["01-16", "02-20", "03-20", "04-17", "05-15", "06-19"]),
        ("0 0 * * fri#3", ["01-16", "02-20", "03-20", "04-17", "05-15", "06-19"]),
        ("0 0 * * 7#1", ["01-04", "02-01", "03-01", "04-05", "05-03", "06-07"]),
        ("0 0 * * 5#5", ["01-30", "05-29", "07-31", "10-30", "01-29", "04-30"]),
        # Lists mix them, with plain weekdays too (which croniter refuses).
        ("0 0 * * MON#1,FRI#3", ["01-05", "01-16", "02-02", "02-20", "03-02", "03-20"]),
        ("0 0 * 1 1#1,5L,SAT", ["01-03", "01-05", "01-10", "01-17", "01-24", "01-30"]),
    ],
)
def test_day_of_week_specials(expression: str, expected: list[str]) -> None:
    assert days(expression) == expected


def test_a_fifth_weekday_of_february_comes_once_in_decades() -> None:
    # A leap February starting on that weekday: every 28 years, 40 across 2100 (no leap day).
    assert [t[:10] for t in upcoming("0 0 * 2 0#5", "2026-01-01T00:00Z", count=4)] == [
        "2032-02-29",
        "2060-02-29",
        "2088-02-29",
        "2128-02-29",
    ]


# -- the two day fields together -----------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # Both restricted: either fires (cron's rule). croniter intersects for # and W.
        ("0 0 1 * 5#3", ["01-16", "02-01", "02-20", "03-01", "03-20", "04-01"]),
        ("0 0 15W * 1", ["01-05", "01-12", "01-15", "01-19", "01-26", "02-02"]),
        ("0 0 L * 5L", ["01-30", "01-31", "02-27", "02-28", "03-27", "03-31"]),
        ("0 0 L * 1", ["01-05", "01-12", "01-19", "01-26", "01-31", "02-02"]),
        # One of them * or ?: the other alone.
        ("0 0 L * ?", ["01-31", "02-28", "03-31", "04-30", "05-31", "06-30"]),
        ("0 0 ? * 1#2", ["01-12", "02-09", "03-09", "04-13", "05-11", "06-08"]),
    ],
)
def test_specials_follow_crons_rule_for_the_two_day_fields(
    expression: str, expected: list[str]
) -> None:
    assert days(expression) == expected


def test_specials_keep_six_fields_and_h() -> None:
    assert upcoming("30 0 12 L * *", "2026-01-31T12:00:30Z", count=2) == [
        "2026-02-28T12:00:30Z",
        "2026-03-31T12:00:30Z",
    ]
    timetable = CronTimetable.parse("H H L * *", seed="billing/nightly")
    hashed = CronTimetable.parse("H H * * *", seed="billing/nightly")
    assert (timetable.minutes, timetable.hours) == (hashed.minutes, hashed.hours)
    assert CronTimetable.parse("0 0 H,L * *", seed="a/b").days.dates == (
        CronTimetable.parse("0 0 H * *", seed="a/b").days.dates
    )


# -- croniter as the reference ---------------------------------------------------------------

WEEKDAY_NAMES = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]

TIMES = st.sampled_from(["0 0", "30 12", "*/20 9-17/4", "5,35 *", "0 */6"])
MONTHS = st.sampled_from(["*", "*", "2", "1-6", "*/3", "2,8", "4,6,9,11"])
SECONDS = st.sampled_from(["", "", "0 ", "30 ", "*/20 "])

# Day-of-month spellings croniter shares: L, nW alone (n <= 28: croniter moves a W day past
# the end of a month to its last day), plain days with L.
DATE_SPECIALS = st.one_of(
    st.just("L"),
    st.integers(1, 28).map(lambda n: f"{n}W"),
    st.lists(st.integers(1, 31).map(str), min_size=1, max_size=3).map(
        lambda plain: ",".join([*plain, "L"])
    ),
)
# Day-of-week: n#k and nL (croniter's Ln), lists of them without plain weekdays.
WEEKDAY_ITEM = st.one_of(
    st.tuples(st.integers(0, 6), st.integers(1, 5), st.booleans()).map(
        lambda item: (f"{WEEKDAY_NAMES[item[0]] if item[2] else item[0]}#{item[1]}",) * 2
    ),
    st.integers(0, 6).map(lambda n: (f"{n}L", f"L{n}")),
)
WEEKDAY_SPECIALS = st.lists(WEEKDAY_ITEM, min_size=1, max_size=3, unique_by=lambda i: i[0])


@st.composite
def expressions(draw: st.DrawFn) -> tuple[str, str]:
    """An expression with day specials, as tickwork spells it and as croniter does."""
    shape = draw(st.sampled_from(["dates", "weekdays", "dates-or-weekdays"]))
    if shape == "weekdays":
        items = draw(WEEKDAY_SPECIALS)
        ours, theirs = "*", "*"
        weekdays = ",".join(i[0] for i in items), ",".join(i[1] for i in items)
    else:
        ours = theirs = draw(DATE_SPECIALS)
        plain = draw(st.sampled_from(["1", "mon-fri", "0,6", "3"]))
        weekdays = ("*", "*") if shape == "dates" else (plain, plain)
    if shape == "dates-or-weekdays" and "W" in ours:
        ours = theirs = "L"  # croniter ignores the day-of-week field next to a W
    head = f"{draw(SECONDS)}{draw(TIMES)}"
    month = draw(MONTHS)
    return (f"{head} {ours} {month} {weekdays[0]}", f"{head} {theirs} {month} {weekdays[1]}")


@settings(max_examples=150, deadline=None)
@given(expressions(), st.integers(0, 6 * 365 * 86400 - 1))
def test_specials_agree_with_croniter_in_utc(pair: tuple[str, str], offset: int) -> None:
    ours, theirs = pair
    timetable = CronTimetable.parse(ours)
    start = at("2024-01-01T00:00Z") + timedelta(seconds=offset)
    with_seconds = len(theirs.split()) == 6
    reference = croniter(theirs, start.replace(tzinfo=None), second_at_beginning=with_seconds)
    moment = start
    for _ in range(6):
        moment = timetable.next_after(moment, UTC_ZONE)
        assert moment == reference.get_next(datetime).replace(tzinfo=UTC), (ours, start)


# -- invalid expressions ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("0 0 L/2 * *", "day-of-month field: cannot read 'L/2': L, L-n, nW and LW are list"),
        ("0 0 1-L * *", "day-of-month field: cannot read '1-L'"),
        ("0 0 L-2/3 * *", "day-of-month field: cannot read 'L-2/3'"),
        ("0 0 15W-20 * *", "day-of-month field: cannot read '15W-20'"),
        ("0 0 LW/2 * *", "day-of-month field: cannot read 'LW/2'"),
        ("0 0 HW * *", "day-of-month field: cannot read 'HW'"),
        ("0 0 WL * *", "day-of-month field: cannot read 'WL'"),
        ("0 0 L-31 * *", "day-of-month field: 'L-31': n in L-n is at most 30"),
        ("0 0 0W * *", "day-of-month field: 0 is out of range 1-31"),
        ("0 0 32W * *", "day-of-month field: 32 is out of range 1-31"),
        ("0 0 L-29 2 *", "day-of-month field: 'L-29' never occurs in month '2'"),
        ("0 0 30W,31 2 *", "day-of-month field: '30W,31' never occurs in month '2'"),
        ("0 0 L-30 4,6 *", "day-of-month field: 'L-30' never occurs in month '4,6'"),
        ("0 0 * * L", "day-of-week field: cannot read 'L': nL (5L: the last Friday) and n#k"),
        ("0 0 * * L5", "day-of-week field: cannot read 'L5'"),
        ("0 0 * * 1-5#2", "day-of-week field: cannot read '1-5#2'"),
        ("0 0 * * 5#3-5", "day-of-week field: cannot read '5#3-5'"),
        ("0 0 * * 5L/2", "day-of-week field: cannot read '5L/2'"),
        ("0 0 * * */2#1", "day-of-week field: cannot read '*/2#1'"),
        ("0 0 * * 5#0", "day-of-week field: '5#0': k in n#k is 1-5"),
        ("0 0 * * 5#6", "day-of-week field: '5#6': k in n#k is 1-5"),
        ("0 0 * * 8#1", "day-of-week field: 8 is out of range 0-7"),
        ("0 0 * * FOO#1", "day-of-week field: 'FOO' is not a number or a name"),
        ("0 0 * * H#1", "day-of-week field: 'H' is not a number or a name"),
        ("0 L * * *", "hour field: 'L' is not a number or a name"),
        ("0 0 * 5#1 *", "month field: cannot read '5#1'"),
    ],
)
def test_invalid_specials_say_why(expression: str, reason: str) -> None:
    with pytest.raises(InvalidExpression, match=f"^{re.escape(reason)}"):
        CronTimetable.parse(expression, seed="ns/name")


@pytest.mark.parametrize(
    "expression",
    ["CRON_TZ=UTC 0 3 * * *", "TZ=Europe/Berlin 0 3 * * *", "cron_tz=UTC @daily", "TZ= 0 3 * * *"],
)
def test_zone_prefixes_are_refused_pointing_to_the_time_zone_field(expression: str) -> None:
    reason = f"CRON_TZ or TZ used in {expression!r} is not supported: give the zone as "
    with pytest.raises(InvalidExpression, match=f"^{re.escape(reason)}spec.timeZone instead"):
        CronTimetable.parse(expression)
    definition = ScheduleDefinition(
        name="nightly", job=JobTemplate(kind="report.nightly"), schedule=expression
    )
    with pytest.raises(DefinitionError) as caught:
        definition.validate("billing")
    assert caught.value.field == "spec.schedule"
    assert str(caught.value).startswith(f"schedule 'nightly': spec.schedule: {reason}")


# -- daylight saving -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("zone", "expression", "after", "expected"),
    [
        # Berlin's spring forward is the last Sunday of March: 02:30 is skipped and fires as
        # the clock jumps (01:00Z), in 2027 too (28 March); 29 March 2027 is a Monday.
        (
            "Europe/Berlin",
            "30 2 * 3 0L",
            "2026-03-01T00:00Z",
            ["2026-03-29T01:00:00Z", "2027-03-28T01:00:00Z"],
        ),
        (
            "Europe/Berlin",
            "30 2 L-2 3 *",
            "2026-03-01T00:00Z",
            ["2026-03-29T01:00:00Z", "2027-03-29T00:30:00Z"],
        ),
        # Its fall back is the 4th and last Sunday of October: 02:30 fires at its first
        # instance (CEST), and with hour * at both.
        ("Europe/Berlin", "30 2 * 10 SUN#4", "2026-10-01T00:00Z", ["2026-10-25T00:30:00Z"]),
        (
            "Europe/Berlin",
            "30 * * 10 7L",
            "2026-10-24T22:00Z",  # midnight CEST on the 25th
            [
                "2026-10-24T22:30:00Z",
                "2026-10-24T23:30:00Z",
                "2026-10-25T00:30:00Z",  # 02:30 CEST
                "2026-10-25T01:30:00Z",  # 02:30 CET
                "2026-10-25T02:30:00Z",
            ],
        ),
        # New York springs forward on the 2nd Sunday of March, falls back on the 1st of
        # November: 1 November 2026 is a Sunday, so 1W is Monday the 2nd.
        (
            "America/New_York",
            "30 2 * 3 0#2",
            "2026-03-01T00:00Z",
            ["2026-03-08T07:00:00Z", "2027-03-14T07:00:00Z"],
        ),
        ("America/New_York", "0 2 L-23 3 *", "2026-03-01T00:00Z", ["2026-03-08T07:00:00Z"]),
        (
            "America/New_York",
            "30 1 * 11 SUN#1",
            "2026-10-01T00:00Z",
            ["2026-11-01T05:30:00Z", "2027-11-07T05:30:00Z"],
        ),
        ("America/New_York", "30 1 1W 11 *", "2026-10-01T00:00Z", ["2026-11-02T06:30:00Z"]),
        # Lord Howe, 30 minutes: back on the 1st Sunday of April (01:30-02:00 twice), forward
        # on the 1st Sunday of October (02:00-02:30 skipped).
        ("Australia/Lord_Howe", "45 1 * 4 0#1", "2026-04-01T00:00Z", ["2026-04-04T14:45:00Z"]),
        (
            "Australia/Lord_Howe",
            "15,45 * * 4 SUN#1",
            "2026-04-04T13:00Z",  # midnight LHDT on the 5th
            [
                "2026-04-04T13:15:00Z",
                "2026-04-04T13:45:00Z",
                "2026-04-04T14:15:00Z",  # 01:15 LHDT
                "2026-04-04T14:45:00Z",  # 01:45 LHDT
                "2026-04-04T15:15:00Z",  # 01:45 LHST
                "2026-04-04T15:45:00Z",  # 02:15 LHST
            ],
        ),
        ("Australia/Lord_Howe", "15 2 * 10 SUN#1", "2026-10-01T00:00Z", ["2026-10-03T15:30:00Z"]),
        ("Australia/Lord_Howe", "15 2 4W 10 *", "2026-10-01T00:00Z", ["2026-10-04T15:15:00Z"]),
    ],
)
def test_specials_across_daylight_saving(
    zone: str, expression: str, after: str, expected: list[str]
) -> None:
    assert upcoming(expression, after, zone, count=len(expected)) == expected


TRANSITIONS = [
    ("Europe/Berlin", "2026-03-29T01:00Z"),
    ("Europe/Berlin", "2026-10-25T01:00Z"),
    ("America/New_York", "2026-03-08T07:00Z"),
    ("America/New_York", "2026-11-01T06:00Z"),
    ("Australia/Lord_Howe", "2026-04-04T15:00Z"),
    ("Australia/Lord_Howe", "2026-10-03T15:30Z"),
]

TimeTest = Callable[[datetime], bool]
TIME_PARTS: list[tuple[str, TimeTest]] = [
    ("30 *", lambda w: w.minute == 30),
    ("15,45 *", lambda w: w.minute in (15, 45)),
    ("30 1", lambda w: (w.hour, w.minute) == (1, 30)),
    ("15,45 2", lambda w: w.hour == 2 and w.minute in (15, 45)),
    ("*/15 1-3", lambda w: 1 <= w.hour <= 3 and w.minute % 15 == 0),
]


def day_fields_naming(day: datetime) -> list[str]:
    """Day fields with specials that pick ``day``'s date (and no other within a week)."""
    length = calendar.monthrange(day.year, day.month)[1]
    weekday = (day.weekday() + 1) % 7
    fields = [f"L-{length - day.day} * *", f"* * {weekday}#{(day.day - 1) // 7 + 1}"]
    if day.day + 7 > length:
        fields.append(f"* * {weekday}L")
    return fields


def oracle(matches: TimeTest, every_hour: bool, tz: ZoneInfo, start: datetime) -> list[datetime]:
    """The design's rules, minute by minute over 60 hours from ``start`` (test_occurrences')."""
    minute = timedelta(minutes=1)
    found, reached = [], start.astimezone(tz).replace(tzinfo=None)
    for step in range(1, 60 * 60 + 1):
        moment = start + step * minute
        reading = moment.astimezone(tz).replace(tzinfo=None)
        newly = [reading] if every_hour else []
        while not every_hour and reached < reading:
            reached += minute
            newly.append(reached)
        if any(matches(wall) for wall in newly):
            found.append(moment)
    return found


@pytest.mark.parametrize(("zone", "instant"), TRANSITIONS)
@pytest.mark.parametrize(("times", "matches"), TIME_PARTS)
def test_specials_on_a_transition_day_follow_the_rules_minute_by_minute(
    zone: str, instant: str, times: str, matches: TimeTest
) -> None:
    tz, start = load_zone(zone), at(instant) - timedelta(hours=24)
    transition_day = at(instant).astimezone(tz)
    on_that_day = transition_day.date()
    expected = oracle(
        lambda w: w.date() == on_that_day and matches(w), times.endswith("*"), tz, start
    )
    assert expected  # the transition day has occurrences
    end = start + timedelta(hours=60)
    for days_part in day_fields_naming(transition_day):
        timetable = CronTimetable.parse(f"{times} {days_part}")
        assert occurrences_between(timetable, start, end, tz, limit=1000) == expected, days_part


# -- preview ---------------------------------------------------------------------------------


def test_preview_shows_specials_in_the_zone() -> None:
    found = preview(
        "30 2 * 3 SUNL", time_zone="Europe/Berlin", start=at("2026-01-01T00:00Z"), count=2
    )
    assert [t.isoformat() for t in found] == [
        "2026-03-29T03:00:00+02:00",
        "2027-03-28T03:00:00+02:00",
    ]
