"""Calendars (spec.exclude, spec.startTime, spec.endTime): the kept occurrences are exactly
the timetable's occurrences whose local clock reading no exclusion names, within the window;
the daylight-saving oracle of test_occurrences extended to exclusions; validation of hostile
and limit values, each refused naming its field."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.schedules.test_occurrences import ORACLE_EXPRESSIONS, TRANSITIONS, WallTest, at, oracle
from tickwork.operator import webhook
from tickwork.schedules import calendars, limits, occurrences
from tickwork.schedules.calendars import Calendar, Calendared, CalendarError
from tickwork.schedules.checks import DefinitionError
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.occurrences import CronTimetable, FixedRate, load_zone, occurrences_between
from tickwork.schedules.options import JobTemplate

NAMESPACE = "billing"


def kept(
    timetable: occurrences.Timetable,
    exclude: list[str],
    tz: str,
    start: datetime,
    end: datetime,
    *,
    window: tuple[datetime | None, datetime | None] = (None, None),
) -> list[datetime]:
    calendar = Calendar.parse(exclude, *window)
    return Calendared(timetable, calendar).between(start, end, load_zone(tz), limit=5000)


# -- the rules, by example ----------------------------------------------------------------


def test_weekends_and_a_holiday_are_left_out_in_the_schedules_zone() -> None:
    found = kept(
        CronTimetable.parse("0 9 * * *"),
        ["* * * * 0,6", "2026-12-25"],
        "Europe/Berlin",
        at("2026-12-20T00:00Z"),
        at("2027-01-01T00:00Z"),
    )
    days = [t.astimezone(load_zone("Europe/Berlin")).date().isoformat() for t in found]
    assert days == [f"2026-12-{d}" for d in (21, 22, 23, 24, 28, 29, 30, 31)]


def test_a_date_is_the_local_day_not_the_utc_one() -> None:
    # 23:30 in New York on Dec 24 is Dec 25 in UTC (kept); on Dec 25 it is excluded.
    found = kept(
        CronTimetable.parse("30 23 * * *"),
        ["2026-12-25"],
        "America/New_York",
        at("2026-12-24T00:00Z"),
        at("2026-12-27T12:00Z"),
    )
    assert found == [at("2026-12-24T04:30Z"), at("2026-12-25T04:30Z"), at("2026-12-27T04:30Z")]


def test_five_fields_name_whole_minutes_six_fields_seconds() -> None:
    every_15s = CronTimetable.parse("*/15 * * * * *")
    start, end = at("2026-06-01T12:00:00Z") - timedelta(seconds=1), at("2026-06-01T12:02:00Z")
    assert kept(every_15s, ["1 12 * * *"], "UTC", start, end) == [
        at("2026-06-01T12:00:00Z"),
        at("2026-06-01T12:00:15Z"),
        at("2026-06-01T12:00:30Z"),
        at("2026-06-01T12:00:45Z"),
        at("2026-06-01T12:02:00Z"),
    ]
    assert kept(every_15s, ["15,45 * 12 * * *"], "UTC", start, at("2026-06-01T12:00:59Z")) == [
        at("2026-06-01T12:00:00Z"),
        at("2026-06-01T12:00:30Z"),
    ]


def test_office_hours_excluded_from_an_every_5_minutes_interval() -> None:
    found = kept(
        FixedRate(timedelta(minutes=5)),
        ["* 9-16 * * 1-5"],
        "UTC",
        at("2026-06-01T08:50Z"),  # a Monday
        at("2026-06-01T17:10Z"),
    )
    assert found == [at(f"2026-06-01T{t}Z") for t in ("08:55", "17:00", "17:05", "17:10")]


def test_start_and_end_are_included_and_nothing_is_outside() -> None:
    hourly = CronTimetable.parse("0 * * * *")
    window = (at("2026-06-01T10:00Z"), at("2026-06-01T13:00Z"))
    found = kept(hourly, [], "UTC", at("2026-06-01T00:00Z"), at("2026-06-02T00:00Z"), window=window)
    assert found == [at(f"2026-06-01T{h}:00Z") for h in (10, 11, 12, 13)]
    calendared = Calendared(hourly, Calendar.parse([], *window))
    assert calendared.next_after(at("2026-06-01T13:00Z"), load_zone("UTC")) is None


def test_an_excluded_occurrence_is_dropped_not_moved() -> None:
    daily = Calendared(CronTimetable.parse("0 9 * * *"), Calendar.parse(["2026-06-02"]))
    assert daily.next_after(at("2026-06-01T09:00Z"), load_zone("UTC")) == at("2026-06-03T09:00Z")


def test_exclusions_read_the_clock_where_daylight_saving_put_the_occurrence() -> None:
    # New York's 02:30 on the spring-forward night fires at 03:00 EDT (07:00Z).
    nightly = CronTimetable.parse("30 2 * * *")
    start, end = at("2026-03-07T00:00Z"), at("2026-03-09T12:00Z")
    tz = "America/New_York"
    assert at("2026-03-08T07:00Z") in kept(nightly, ["* 2 * * *"], tz, start, end)
    assert at("2026-03-08T07:00Z") not in kept(nightly, ["* 3 * * *"], tz, start, end)


def test_an_hour_repeated_by_the_clock_is_excluded_on_both_passes() -> None:
    every_20m = CronTimetable.parse("*/20 * * * *")  # hour *: fires on both passes
    start, end = at("2026-11-01T04:30Z"), at("2026-11-01T07:30Z")
    found = kept(every_20m, ["* 1 * * *"], "America/New_York", start, end)
    readings = {t.astimezone(load_zone("America/New_York")).hour for t in found}
    assert 1 not in readings
    assert found[0] == at("2026-11-01T04:40Z")  # 00:40 EDT
    assert found[1] == at("2026-11-01T07:00Z")  # 02:00 EST, after both passes of 01:xx


# -- the daylight-saving oracle, with exclusions ------------------------------------------

EXCLUSIONS: list[tuple[list[str], WallTest]] = [
    (["* 1 * * *"], lambda w: w.hour == 1),
    (["15-44 * * * *"], lambda w: 15 <= w.minute <= 44),
    (["* 0-2 * * *", "40-59 3 * * *"], lambda w: w.hour <= 2 or (w.hour == 3 and w.minute >= 40)),
    (["* * * * 0"], lambda w: w.isoweekday() == 7),
]


def oracle_dates(expected: list[datetime], tz: Any, dates: set[date]) -> list[datetime]:
    return [t for t in expected if t.astimezone(tz).date() not in dates]


@pytest.mark.parametrize(("zone", "instant", "shift"), TRANSITIONS)
@pytest.mark.parametrize(("expression", "matches"), ORACLE_EXPRESSIONS)
@pytest.mark.parametrize(("exclude", "excluded"), EXCLUSIONS)
def test_daylight_saving_oracle_with_exclusions(
    zone: str,
    instant: str,
    shift: timedelta,
    expression: str,
    matches: WallTest,
    exclude: list[str],
    excluded: WallTest,
) -> None:
    """The oracle's occurrences, less those whose clock reading an exclusion names."""
    tz, start = load_zone(zone), at(instant) - timedelta(hours=24)
    expected = [
        t
        for t in oracle(expression, matches, tz, start)
        if not excluded(t.astimezone(tz).replace(tzinfo=None))
    ]
    calendared = Calendared(CronTimetable.parse(expression), Calendar.parse(exclude))
    end = start + timedelta(hours=60)
    assert calendared.between(start, end, tz, limit=1000) == expected
    for offset in range(0, 6 * 60 * 60, 7 * 60 + 13):
        moment = at(instant) - timedelta(hours=3) + timedelta(seconds=offset)
        following = next((t for t in expected if t > moment), None)
        if following is not None:
            assert calendared.next_after(moment, tz) == following


# -- property: skipping never loses or invents an occurrence -------------------------------

ZONES = ["UTC", "America/New_York", "Europe/London", "Australia/Lord_Howe", "Asia/Kolkata"]
SCHEDULES = [
    "*/7 * * * *",
    "0 * * * *",
    "30 1,2 * * *",
    "*/20 * * * * *",
    "0 9 * * 1-5",
    "@every 13m",
]


def field_set(top: int) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(0, top), min_size=1, max_size=4, unique=True)


@st.composite
def exclusion(draw: st.DrawFn) -> tuple[str, Callable[[datetime], bool]]:
    """A cron exclusion and an independent test of a reading against it."""
    minutes = draw(st.none() | field_set(59))
    hours = draw(st.none() | field_set(23))
    weekdays = draw(st.none() | field_set(6))
    seconds = draw(st.none() | field_set(59)) if draw(st.booleans()) else None
    text = " ".join(
        "*" if values is None else ",".join(map(str, values))
        for values in (minutes, hours, None, None, weekdays)
    )
    if seconds is not None:
        text = ",".join(map(str, seconds)) + " " + text

    def test(w: datetime) -> bool:
        return (
            (minutes is None or w.minute in minutes)
            and (hours is None or w.hour in hours)
            and (weekdays is None or w.isoweekday() % 7 in weekdays)
            and (seconds is None or w.second in seconds)
        )

    return text, test


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    schedule=st.sampled_from(SCHEDULES),
    zone=st.sampled_from(ZONES),
    start=st.datetimes(datetime(2026, 1, 1), datetime(2026, 12, 28)),
    crons=st.lists(exclusion(), max_size=3),
    day_offsets=st.lists(st.integers(0, 3), max_size=2),
)
def test_kept_occurrences_are_the_timetables_filtered(
    schedule: str,
    zone: str,
    start: datetime,
    crons: list[tuple[str, Callable[[datetime], bool]]],
    day_offsets: list[int],
) -> None:
    tz = load_zone(zone)
    begin = start.replace(tzinfo=UTC)
    end = begin + timedelta(days=3)
    dates = {(begin + timedelta(days=d)).astimezone(tz).date() for d in day_offsets}
    timetable: occurrences.Timetable
    if schedule.startswith("@every"):
        timetable = FixedRate(timedelta(minutes=13))
    else:
        timetable = CronTimetable.parse(schedule)
    raw = occurrences_between(timetable, begin, end, tz, limit=20_000)

    def excluded(t: datetime) -> bool:
        local = t.astimezone(tz)
        reading = local.replace(tzinfo=None)
        return local.date() in dates or any(test(reading) for _, test in crons)

    expected = [t for t in raw if not excluded(t)]
    items = [text for text, _ in crons] + [d.isoformat() for d in dates]
    calendared = Calendared(timetable, Calendar.parse(items))
    try:
        found = calendared.between(begin, end, tz, limit=20_000)
    except CalendarError:
        # Nothing kept for longer than a search may look: then nothing is expected here.
        assert expected == []
        return
    assert found == expected


# -- validation: everything excluded, limits, hostile values --------------------------------


def definition(**fields: Any) -> ScheduleDefinition:
    fields.setdefault("schedule", "0 9 * * *")
    return ScheduleDefinition(name="nightly", job=JobTemplate(kind="report.nightly"), **fields)


def refused(field: str, **fields: Any) -> str:
    with pytest.raises(DefinitionError) as caught:
        definition(**fields).validate(NAMESPACE)
    assert caught.value.field == field, caught.value
    return str(caught.value)


@pytest.mark.parametrize(
    "exclude",
    [
        ["* * * * *"],
        ["* * * * 0-6"],
        ["* * * * 1-5", "* * * * 0,6"],
        ["* 9 * * *"],  # every 09:00 run
        ["0-29 * * * *", "30-59 * * * *"],
        ["* * * 1-6 *", "* * * 7-12 *"],
    ],
)
def test_an_exclusion_that_removes_every_occurrence_is_refused(exclude: list[str]) -> None:
    message = refused("spec.exclude", exclude=tuple(exclude))
    assert "excludes every occurrence" in message


def test_every_second_removed_by_seconds_is_refused_quickly() -> None:
    started = time.monotonic()
    refused(
        "spec.exclude",
        schedule="* * * * * *",
        exclude=tuple(f"{n * 4}-{n * 4 + 3} * * * * *" for n in range(15)),
    )
    assert time.monotonic() - started < 30  # a safety net: about a second on a busy machine


def test_dates_covering_the_whole_window_are_refused_naming_exclude() -> None:
    message = refused(
        "spec.exclude",
        exclude=("2026-06-01", "2026-06-02"),
        start_time=at("2026-06-01T00:00Z"),
        end_time=at("2026-06-02T23:00Z"),
    )
    assert "between spec.startTime and spec.endTime" in message


def test_a_window_without_any_occurrence_is_refused_naming_end_time() -> None:
    message = refused(
        "spec.endTime", start_time=at("2026-06-01T10:00Z"), end_time=at("2026-06-01T11:00Z")
    )
    assert "2026-06-02T09:00:00+00:00" in message


@pytest.mark.parametrize("end", ["2026-06-01T10:00Z", "2026-06-01T09:00Z"])
def test_end_time_not_after_start_time_is_refused(end: str) -> None:
    message = refused("spec.endTime", start_time=at("2026-06-01T10:00Z"), end_time=at(end))
    assert "must be after spec.startTime" in message


def test_an_end_time_in_the_past_is_allowed_the_schedule_has_ended() -> None:
    definition(end_time=at("2001-01-01T00:00Z")).validate(NAMESPACE)


def test_a_schedule_with_rare_kept_occurrences_is_allowed() -> None:
    definition(schedule="0 0 29 2 *", exclude=("* * * * 0,6",)).validate(NAMESPACE)
    definition(exclude=tuple(f"2026-01-{d:02}" for d in range(1, 32))).validate(NAMESPACE)


@pytest.mark.parametrize(
    ("exclude", "field", "reason"),
    [
        (["@daily"], "spec.exclude[0]", "a macro names an instant"),
        (["* * * *"], "spec.exclude[0]", "got 4 fields"),
        (["0 9 * * * * *"], "spec.exclude[0]", "got 7 fields"),
        (["0 9 * * 8"], "spec.exclude[0]", "day-of-week field: 8 is out of range"),
        (["1 * * * *", "2026-02-30"], "spec.exclude[1]", "is not a date"),
        (["2026-13-01"], "spec.exclude[0]", "is not a date"),
        (["9000-01-01"], "spec.exclude[0]", "the year must be 1970 to 8999"),
        (["1969-12-31"], "spec.exclude[0]", "the year must be 1970 to 8999"),
        (["   "], "spec.exclude[0]", "not blank"),
        (["*" * 129], "spec.exclude[0]", "1 to 128 characters"),
        (["CRON_TZ=UTC * * * * *"], "spec.exclude[0]", "CRON_TZ or TZ"),
        (["2026-12-25T00:00"], "spec.exclude[0]", "5 fields"),
        ([f"{n} 3 * * *" for n in range(17)], "spec.exclude[16]", "more than 16 cron"),
        (["2026-01-01"] * 101, "spec.exclude", "at most 100"),
    ],
)
def test_hostile_exclusions_are_refused_naming_the_item(
    exclude: list[str], field: str, reason: str
) -> None:
    assert reason in refused(field, exclude=tuple(exclude))


def test_limits_themselves_are_accepted() -> None:
    dates = tuple((date(2030, 1, 1) + timedelta(days=n)).isoformat() for n in range(84))
    crons = tuple(f"{n} 3 * * *" for n in range(16))
    assert len(dates + crons) == limits.MAX_EXCLUSIONS
    definition(exclude=dates + crons).validate(NAMESPACE)
    longest = "0" + ",0" * 59 + "  3 * * *"
    assert len(longest) == limits.MAX_EXCLUSION_LENGTH
    definition(exclude=(longest,)).validate(NAMESPACE)
    definition(
        start_time=at("1970-01-01T00:00Z"), end_time=datetime(8999, 12, 31, 12, tzinfo=UTC)
    ).validate(NAMESPACE)
    definition(exclude=("1970-01-01", "8999-12-31")).validate(NAMESPACE)


@pytest.mark.parametrize(
    ("spec", "field", "reason"),
    [
        ({"exclude": "* * * * 0"}, "spec.exclude", "must be a list of strings"),
        ({"exclude": [5]}, "spec.exclude[0]", "must be a string"),
        ({"exclude": [None]}, "spec.exclude[0]", "must be a string"),
        ({"exclude": ["x"] * 101}, "spec.exclude", "at most 100"),
        ({"startTime": "2026-06-01"}, "spec.startTime", "is not an RFC 3339 time"),
        ({"startTime": "2026-06-01T10:00:00"}, "spec.startTime", "has no UTC offset"),
        ({"endTime": "tomorrow"}, "spec.endTime", "is not an RFC 3339 time"),
        ({"endTime": "9000-01-01T00:00:00Z"}, "spec.endTime", "the year must be"),
        ({"startTime": 1767225600}, "spec.startTime", "must be a string"),
        ({"startTime": "1969-12-31T23:59:59Z"}, "spec.startTime", "the year must be"),
    ],
)
def test_hostile_manifest_values_are_refused_naming_the_field(
    spec: dict[str, Any], field: str, reason: str
) -> None:
    full = {"schedule": "0 9 * * *", "job": {"kind": "report.nightly"}, **spec}
    with pytest.raises(DefinitionError) as caught:
        ScheduleDefinition.from_spec("nightly", full).validate(NAMESPACE)
    assert caught.value.field == field
    assert reason in str(caught.value)


def test_the_spec_round_trips() -> None:
    spec = {
        "schedule": "0 9 * * *",
        "timeZone": "Europe/Berlin",
        "exclude": ["* * * * 0,6", "2026-12-25"],
        "startTime": "2026-01-01T00:00:00+01:00",
        "endTime": "2026-12-31T23:59:59Z",
        "job": {"kind": "report.nightly"},
    }
    parsed = ScheduleDefinition.from_spec("nightly", spec)
    parsed.validate(NAMESPACE)
    assert parsed.exclude == ("* * * * 0,6", "2026-12-25")
    assert parsed.start_time == datetime(2025, 12, 31, 23, tzinfo=UTC)
    again = ScheduleDefinition.from_spec("nightly", parsed.to_spec())
    assert again == parsed
    plain = definition().to_spec()
    assert not {"exclude", "startTime", "endTime"} & set(plain)


def test_hashed_exclusions_follow_the_schedules_seed() -> None:
    hashed = definition(schedule="* * * * *", exclude=("H * * * *",))
    calendar = hashed.calendar(NAMESPACE)
    minute = occurrences.hashed_value(f"{NAMESPACE}/nightly", "minute") % 60
    assert calendar.crons[0].timetable.minutes == 1 << minute


def test_the_runtime_search_is_bounded_and_says_why() -> None:
    # Validation looks from startTime; a calendar made by hand may exclude everything.
    everything = Calendared(CronTimetable.parse("* * * * *"), Calendar.parse(["* * * * *"]))
    with pytest.raises(CalendarError) as caught:
        everything.next_after(at("2026-06-01T00:00Z"), load_zone("UTC"))
    assert caught.value.field == "spec.exclude"
    assert calendars.RUNTIME_YEARS == 400


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"exclude": ["* * * * *"]}, "spec.exclude"),
        ({"exclude": ["@weekly"]}, "spec.exclude[0]"),
        ({"startTime": "2030-01-02T00:00:00Z", "endTime": "2030-01-01T00:00:00Z"}, "spec.endTime"),
    ],
)
def test_the_operator_and_the_webhook_refuse_a_bad_calendar_naming_the_field(
    spec: dict[str, Any], field: str
) -> None:
    body = {
        "apiVersion": "tickwork.io/v1",
        "kind": "Schedule",
        "metadata": {"name": "nightly", "namespace": "team-a", "uid": "u-1", "generation": 1},
        "spec": {"schedule": "0 9 * * *", "job": {"kind": "report.nightly"}, **spec},
    }
    message = webhook.refused(body)
    assert message is not None and message.startswith(f"{field}: "), message


# -- exclusions covering every second (minute, hour) the schedule fires at skip whole units --

COVERING: list[tuple[str, str, WallTest]] = [
    ("* * * * *", "0 * * * * 1-5", lambda w: w.isoweekday() <= 5 and w.second == 0),
    ("*/20 * * * * *", "0,20,40 * 1 * * *", lambda w: w.hour == 1 and w.second % 20 == 0),
    ("30 1,2 * * *", "* 30 1,2 * * *", lambda w: w.hour in (1, 2) and w.minute == 30),
    ("*/15 * * * *", "* 0,15,30,45 0-22 * * *", lambda w: w.hour <= 22 and w.minute % 15 == 0),
]


@pytest.mark.parametrize(("zone", "instant", "shift"), TRANSITIONS)
@pytest.mark.parametrize(("schedule", "exclude", "excluded"), COVERING)
def test_whole_units_skipped_for_the_schedules_fields_lose_nothing(
    zone: str, instant: str, shift: timedelta, schedule: str, exclude: str, excluded: WallTest
) -> None:
    tz, start = load_zone(zone), at(instant) - timedelta(days=3)
    end = start + timedelta(days=5)
    grid = CronTimetable.parse(schedule)
    raw = occurrences_between(grid, start, end, tz, limit=100_000)
    expected = [t for t in raw if not excluded(t.astimezone(tz).replace(tzinfo=None))]
    calendared = Calendared(grid, Calendar.parse([exclude]))
    assert calendared.between(start, end, tz, limit=100_000) == expected


def test_a_seconds_exclusion_of_a_minutely_schedule_skips_whole_weekdays() -> None:
    """``0 * * * * 1-5`` names second 0 of each weekday minute: every occurrence of
    ``* * * * *`` on a weekday. Found with one jump per day, far within the search bound."""
    weekends = Calendared(CronTimetable.parse("* * * * *"), Calendar.parse(["0 * * * * 1-5"]))
    monday = at("2030-01-07T00:00Z")
    assert weekends.next_after(monday, load_zone("UTC")) == at("2030-01-12T00:00Z")
    assert weekends.calendar.crons[0].unit == 0  # a second, for an every-second schedule
    assert weekends._units == (3,)  # a day, for this one
