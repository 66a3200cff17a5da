"""Occurrence computation: cron grammar, hashed fields, fixed rate, daylight saving.

Expected instants are literal UTC timestamps worked out by hand from the zones' 2026 rules:

* America/New_York: EST (-5) to EDT (-4) on Sunday 8 March at 02:00 local (07:00Z), back on
  Sunday 1 November at 02:00 EDT (06:00Z), so 01:00-02:00 local happens twice.
* Europe/London: GMT (+0) to BST (+1) on Sunday 29 March at 01:00Z, back on Sunday
  25 October at 01:00Z, so 01:00-02:00 local happens twice.
* Australia/Lord_Howe, a 30-minute shift: LHDT (+11) to LHST (+10:30) on Sunday 5 April at
  02:00 LHDT (15:00Z on 4 April), so 01:30-02:00 local happens twice; back to LHDT on Sunday
  4 October at 02:00 LHST (15:30Z on 3 October), so 02:00-02:30 local never happens.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter

from tickwork.schedules.calendars import preview
from tickwork.schedules.occurrences import (
    EPOCH,
    CronTimetable,
    FixedRate,
    InvalidExpression,
    interval_in,
    load_zone,
    occurrences_between,
    parse_duration,
)

UTC_ZONE = ZoneInfo("UTC")


def at(text: str) -> datetime:
    """A literal UTC instant: ``at("2026-03-08T07:00Z")``."""
    return datetime.fromisoformat(text).astimezone(UTC)


def upcoming(
    expression: str, after: str, zone: str = "UTC", count: int = 4, seed: str = ""
) -> list[str]:
    """The next ``count`` occurrences, chained through next_after, as ``YYYY-MM-DDTHH:MM:SSZ``."""
    timetable = CronTimetable.parse(expression, seed=seed)
    moment, found = at(after), []
    for _ in range(count):
        moment = timetable.next_after(moment, load_zone(zone))
        assert moment.tzinfo is UTC
        found.append(moment.strftime("%Y-%m-%dT%H:%M:%SZ"))
    return found


# -- the cron grammar ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        ("*/15 * * * *", "2026-01-01T00:07Z", ["00:15", "00:30", "00:45", "01:00"]),
        ("5,10-12 * * * *", "2026-01-01T00:00Z", ["00:05", "00:10", "00:11", "00:12"]),
        ("10/20 * * * *", "2026-01-01T00:00Z", ["00:10", "00:30", "00:50", "01:10"]),
        ("0 9-17/4 * * *", "2026-01-01T10:00Z", ["13:00", "17:00", "09:00", "13:00"]),
        ("5-5 * * * *", "2026-01-01T00:00Z", ["00:05", "01:05", "02:05", "03:05"]),
        ("0 23 * * *", "2026-01-01T23:00Z", ["23:00", "23:00", "23:00", "23:00"]),
    ],
)
def test_minutes_and_hours(expression: str, after: str, expected: list[str]) -> None:
    assert [t[11:16] for t in upcoming(expression, after)] == expected


@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        # 1 January 2026 is a Thursday.
        ("0 0 * * mon-fri", "2026-01-02T12:00Z", ["2026-01-05", "2026-01-06", "2026-01-07"]),
        ("0 0 * * 7", "2026-01-01T00:00Z", ["2026-01-04", "2026-01-11", "2026-01-18"]),
        ("0 0 * * 0", "2026-01-01T00:00Z", ["2026-01-04", "2026-01-11", "2026-01-18"]),
        ("0 0 * * sat-7", "2026-01-01T00:00Z", ["2026-01-03", "2026-01-04", "2026-01-10"]),
        ("0 0 1 jan,Jul *", "2026-01-01T00:00Z", ["2026-07-01", "2027-01-01", "2027-07-01"]),
        ("0 0 31 * *", "2026-01-31T01:00Z", ["2026-03-31", "2026-05-31", "2026-07-31"]),
        ("0 0 29 2 *", "2026-01-01T00:00Z", ["2028-02-29", "2032-02-29", "2036-02-29"]),
        # Both day fields restricted: either matches (Vixie cron, Kubernetes CronJob).
        ("0 0 1 * mon", "2026-01-31T00:00Z", ["2026-02-01", "2026-02-02", "2026-02-09"]),
        # One day field written `*` (or `?`): the other one alone decides.
        ("0 0 */10 * *", "2026-01-31T00:00Z", ["2026-02-01", "2026-02-11", "2026-02-21"]),
        ("0 0 ? * MON", "2026-01-31T00:00Z", ["2026-02-02", "2026-02-09", "2026-02-16"]),
        ("0 0 13 * ?", "2026-01-31T00:00Z", ["2026-02-13", "2026-03-13", "2026-04-13"]),
    ],
)
def test_days_and_months(expression: str, after: str, expected: list[str]) -> None:
    assert [t[:10] for t in upcoming(expression, after, count=3)] == expected


@pytest.mark.parametrize(
    ("macro", "expected"),
    [
        ("@yearly", "2027-01-01T00:00:00Z"),
        ("@annually", "2027-01-01T00:00:00Z"),
        ("@monthly", "2026-02-01T00:00:00Z"),
        ("@weekly", "2026-01-04T00:00:00Z"),
        ("@daily", "2026-01-02T00:00:00Z"),
        ("@midnight", "2026-01-02T00:00:00Z"),
        ("@hourly", "2026-01-01T13:00:00Z"),
        ("@DAILY", "2026-01-02T00:00:00Z"),
    ],
)
def test_macros(macro: str, expected: str) -> None:
    assert upcoming(macro, "2026-01-01T12:30Z", count=1) == [expected]


@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        (
            "*/20 * * * * *",
            "2026-01-01T00:00:05Z",
            ["2026-01-01T00:00:20Z", "2026-01-01T00:00:40Z", "2026-01-01T00:01:00Z"],
        ),
        (
            "30 0 12 * * *",
            "2026-01-01T12:00:30Z",
            ["2026-01-02T12:00:30Z", "2026-01-03T12:00:30Z", "2026-01-04T12:00:30Z"],
        ),
        (
            "0 0 0 1 1 ?",
            "2026-01-01T00:00Z",
            ["2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z", "2029-01-01T00:00:00Z"],
        ),
        (
            "* * * * * *",
            "2026-01-01T00:00:00.500Z",
            ["2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z", "2026-01-01T00:00:03Z"],
        ),
    ],
)
def test_six_fields_put_seconds_first(expression: str, after: str, expected: list[str]) -> None:
    assert upcoming(expression, after, count=3) == expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("0,0,*/30 * * * *", ["00:00", "00:30", "01:00"]),
        ("0,30 0-1,1 * * *", ["00:00", "00:30", "01:00"]),
        # 1 January 2026 is both the 1st and a Thursday: still one occurrence that day.
        ("0 0 1 * thu", ["00:00", "00:00", "00:00"]),
    ],
)
def test_fields_landing_on_one_instant_make_one_occurrence(
    expression: str, expected: list[str]
) -> None:
    found = upcoming(expression, "2025-12-31T23:59Z", count=3)
    assert [t[11:16] for t in found] == expected
    assert len(set(found)) == 3


def test_next_after_is_strict_and_accepts_any_zone() -> None:
    timetable = CronTimetable.parse("0 * * * *")
    assert timetable.next_after(at("2026-01-01T10:00Z"), UTC_ZONE) == at("2026-01-01T11:00Z")
    berlin = datetime(2026, 1, 1, 11, 0, tzinfo=ZoneInfo("Europe/Berlin"))  # 10:00Z
    assert timetable.next_after(berlin, UTC_ZONE) == at("2026-01-01T11:00Z")


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValueError, match="no time zone"):
        CronTimetable.parse("* * * * *").next_after(datetime(2026, 1, 1), UTC_ZONE)


def test_parsing_is_cached() -> None:
    assert CronTimetable.parse("*/5 * * * *") is CronTimetable.parse("*/5 * * * *")
    assert CronTimetable.parse("0 * * * *", seed="a/b") is CronTimetable.parse("0 * * * *")


REFERENCE_EXPRESSIONS = [
    "* * * * *",
    "*/7 * * * *",
    "0 9-17/2 * * mon-fri",
    "15,45 3 1,15 * *",
    "0 0 29 2 *",
    "0 0 1 */3 *",
    "0 12 13 * 5",
    "30 4 1-7 * sun",
    "5 4 * jan-mar sat,sun",
    "10/20 * * * *",
    "0 0 31 * *",
    "0 8 * * 1-5",
]


@pytest.mark.parametrize("expression", REFERENCE_EXPRESSIONS)
def test_grammar_agrees_with_croniter_in_utc(expression: str) -> None:
    # croniter is the reference for the plain grammar; only the time zone handling (and
    # ranges with equal ends, which croniter reads as the whole field) differ on purpose.
    timetable = CronTimetable.parse(expression)
    rng = random.Random(expression)
    for _ in range(20):
        start = at("2024-01-01T00:00Z") + timedelta(seconds=rng.randrange(5 * 365 * 86400))
        reference = croniter(expression, start.replace(tzinfo=None))
        moment = start
        for _ in range(5):
            moment = timetable.next_after(moment, UTC_ZONE)
            assert moment == reference.get_next(datetime).replace(tzinfo=UTC)


# -- invalid expressions and zones ---------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("", "expected 5 fields, or 6 with seconds first; got 0 in ''"),
        ("* * * *", "expected 5 fields, or 6 with seconds first; got 4 in '* * * *'"),
        ("0 0 0 * * * 2026", "expected 5 fields, or 6 with seconds first; got 7"),
        ("@reboot", "@reboot is not supported: a schedule needs a time"),
        ("@fortnightly", "unknown macro '@fortnightly' (known: @yearly"),
        ("garbage", "expected 5 fields, or 6 with seconds first; got 1 in 'garbage'"),
        ("60 * * * * *", "second field: 60 is out of range 0-59"),
        ("61 * * * *", "minute field: 61 is out of range 0-59"),
        ("* 24 * * *", "hour field: 24 is out of range 0-23"),
        ("* * 0 * *", "day-of-month field: 0 is out of range 1-31"),
        ("* * * 13 *", "month field: 13 is out of range 1-12"),
        ("* * * * 8", "day-of-week field: 8 is out of range 0-7"),
        ("*/0 * * * *", "minute field: step must be at least 1"),
        ("5-1 * * * *", "minute field: range 5-1 runs backwards"),
        ("* * * * fri-mon", "day-of-week field: range fri-mon runs backwards"),
        ("* * * foo *", "month field: 'foo' is not a number or a name"),
        ("* * * * mon,,fri", "day-of-week field: empty list item"),
        ("-5 * * * *", "minute field: cannot read '-5'"),
        ("1.5 * * * *", "minute field: cannot read '1.5'"),
        ("*-5 * * * *", "minute field: cannot read '*-5'"),
        ("0 0 \u0663 * *", "day-of-month field: cannot read '\u0663'"),
        ("0 0 L/2 * *", "day-of-month field: cannot read 'L/2': L, L-n, nW and LW are list"),
        ("? * * * *", "minute field: '?' stands alone, in day-of-month or day-of-week"),
        ("0 0 ?/2 * *", "day-of-month field: '?' stands alone"),
        ("0 0 30 2 *", "day-of-month field: day 30 never occurs in month '2'"),
        ("0 0 31 apr,jun *", "day-of-month field: day 31 never occurs in month 'apr,jun'"),
        ("H/61 * * * *", "minute field: step 61 is larger than the range 0-59"),
        ("H(30-10) * * * *", "minute field: range 30-10 runs backwards"),
        ("H(0-60) * * * *", "minute field: 60 is out of range 0-59"),
    ],
)
def test_invalid_expressions_say_why(expression: str, reason: str) -> None:
    with pytest.raises(InvalidExpression, match=f"^{re.escape(reason)}") as caught:
        CronTimetable.parse(expression, seed="ns/name")
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    "name",
    [
        "",
        "Mars/Olympus",
        "america/new_york",
        "/etc/localtime",
        "../etc/passwd",
        "localtime",
        "America",
        "zone.tab",
        "right/UTC",
        "Europe/London ",
    ],
)
def test_unknown_zones_are_refused(name: str) -> None:
    reason = f"unknown time zone {name!r} (expected an IANA name like 'Europe/Berlin')"
    with pytest.raises(InvalidExpression, match=f"^{re.escape(reason)}$"):
        load_zone(name)


@pytest.mark.parametrize("name", ["UTC", "Etc/UTC", "America/New_York", "Australia/Lord_Howe"])
def test_known_zones_load(name: str) -> None:
    assert load_zone(name) is load_zone(name)
    assert load_zone(name).key == name


# -- hashed fields -------------------------------------------------------------------------


def documented_hash(seed: str, field_name: str) -> int:
    """The derivation written in ``hashed_value``'s docstring, reimplemented here."""
    digest = hashlib.sha256(f"{seed}/{field_name}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def test_hashed_fields_follow_the_documented_derivation() -> None:
    seed = "billing/nightly"
    minute, hour = documented_hash(seed, "minute") % 60, documented_hash(seed, "hour") % 24
    assert (hour, minute) == (8, 53)  # pinned: changing it would move every H schedule
    assert upcoming("H H * * *", "2026-01-01T00:00Z", count=2, seed=seed) == [
        "2026-01-01T08:53:00Z",
        "2026-01-02T08:53:00Z",
    ]
    first = documented_hash(seed, "minute") % 15
    assert [t[14:16] for t in upcoming("H/15 * * * *", "2026-01-01T00:00Z", seed=seed)] == [
        f"{first + k * 15:02d}" for k in range(4)
    ]
    # H(0-29)/10 starts at v % 10 within 0-29; H(9-17) is 9 + v % 9.
    minute = documented_hash(seed, "minute") % 10
    hour = 9 + documented_hash(seed, "hour") % 9
    assert upcoming("H(0-29)/10 H(9-17) * * *", "2026-01-01T00:00Z", count=3, seed=seed) == [
        f"2026-01-01T{hour:02d}:{minute + k * 10:02d}:00Z" for k in range(3)
    ]
    # Day-of-month hashes into 1-28 and day-of-week into 0-6 (Sunday 0), like Jenkins.
    day = 1 + documented_hash("a/b", "day-of-month") % 28
    assert CronTimetable.parse("0 0 H * *", seed="a/b").days.dates == 1 << day
    weekday = documented_hash("a/b", "day-of-week") % 7
    assert CronTimetable.parse("0 0 * * H", seed="a/b").days.weekdays == 1 << weekday


def test_hashed_fields_are_the_same_for_five_and_six_fields() -> None:
    five = CronTimetable.parse("H H * * *", seed="ns/job")
    six = CronTimetable.parse("0 H H * * *", seed="ns/job")
    assert (five.minutes, five.hours) == (six.minutes, six.hours)


def masks(expression: str, seed: str) -> list[int]:
    t = CronTimetable.parse(expression, seed=seed)
    return [t.seconds, t.minutes, t.hours, t.days.dates, t.months, t.days.weekdays]


HASHED = ["H H * * *", "H/15 H(0-5) H * H", "H H(9-17)/3 * * 1-5", "H * * * * *"]
SEEDS = ["billing/nightly", "billing/weekly", "reports/daily", "", "ns/ünïcode"]


def test_hashed_fields_are_identical_in_another_process() -> None:
    script = (
        "import json, sys\n"
        "from tickwork.schedules.occurrences import CronTimetable\n"
        "cases = json.loads(sys.argv[1])\n"
        "timetables = [CronTimetable.parse(e, seed=s) for e, s in cases]\n"
        "print(json.dumps([[t.seconds, t.minutes, t.hours, t.days.dates, t.months,"
        " t.days.weekdays] for t in timetables]))\n"
    )
    cases = [(expression, seed) for expression in HASHED for seed in SEEDS]
    expected = [masks(expression, seed) for expression, seed in cases]
    for hash_seed in ("1", "4242"):
        result = subprocess.run(
            [sys.executable, "-c", script, json.dumps(cases)],
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(result.stdout) == expected


def test_different_seeds_spread() -> None:
    minutes = {
        CronTimetable.parse("H * * * *", seed=f"ns/job-{i}").minutes.bit_length() - 1
        for i in range(200)
    }
    assert len(minutes) > 45
    assert masks("H H * * *", "ns/a") != masks("H H * * *", "ns/b")


def test_seed_does_not_matter_without_h() -> None:
    assert masks("*/5 * * * thu", "ns/a") == masks("*/5 * * * thu", "ns/b")


# -- fixed rate and durations --------------------------------------------------------------


def test_fixed_rate_is_anchored_at_the_epoch() -> None:
    every_7s = FixedRate(timedelta(seconds=7))
    assert every_7s.anchor == EPOCH
    # 2026-01-01T00:00Z is 1_767_225_600 s after the epoch, a multiple of 7.
    assert every_7s.next_after(at("2025-12-31T23:59:59Z"), UTC_ZONE) == at("2026-01-01T00:00Z")
    assert every_7s.next_after(at("2026-01-01T00:00Z"), UTC_ZONE) == at("2026-01-01T00:00:07Z")
    assert every_7s.next_after(at("2026-01-01T00:00:06.9Z"), UTC_ZONE) == at("2026-01-01T00:00:07Z")


def test_fixed_rate_ignores_the_zone_and_daylight_saving() -> None:
    hourly = FixedRate(timedelta(hours=1), anchor=at("2026-01-01T00:15Z"))
    new_york = load_zone("America/New_York")
    found = occurrences_between(
        hourly, at("2026-03-08T05:00Z"), at("2026-03-08T09:00Z"), new_york, limit=10
    )
    assert found == [at(f"2026-03-08T0{h}:15Z") for h in (5, 6, 7, 8)]
    assert hourly.next_after(at("2025-12-31T21:20Z"), UTC_ZONE) == at("2025-12-31T22:15Z")


@pytest.mark.parametrize(("seconds", "shown"), [(0, "0s"), (-5, "-5s"), (0.5, "0.5s")])
def test_fixed_rate_needs_at_least_a_second(seconds: float, shown: str) -> None:
    with pytest.raises(InvalidExpression, match=f"^interval must be at least 1s, got {shown}$"):
        FixedRate(timedelta(seconds=seconds))


def test_fixed_rate_needs_an_aware_anchor() -> None:
    with pytest.raises(ValueError, match="no time zone"):
        FixedRate(timedelta(seconds=5), anchor=datetime(2026, 1, 1))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30s", timedelta(seconds=30)),
        ("5m", timedelta(minutes=5)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("2h", timedelta(hours=2)),
        ("1d", timedelta(days=1)),
        ("1d2h3m4s", timedelta(days=1, hours=2, minutes=3, seconds=4)),
        ("90m", timedelta(minutes=90)),
        ("1.5s", timedelta(seconds=1.5)),
        ("1.5h", timedelta(minutes=90)),
        ("0.0001d", timedelta(microseconds=8_640_000)),
    ],
)
def test_durations(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "expected numbers with units d, h, m, s"),
        ("30", "expected numbers with units d, h, m, s"),
        ("5ms", "expected numbers with units d, h, m, s"),
        ("1w", "expected numbers with units d, h, m, s"),
        ("-5s", "expected numbers with units d, h, m, s"),
        (" 5s", "expected numbers with units d, h, m, s"),
        ("5 s", "expected numbers with units d, h, m, s"),
        (".5s", "expected numbers with units d, h, m, s"),
        ("1h1h", "give each unit once, in order d h m s"),
        ("30m1h", "give each unit once, in order d h m s"),
        ("0s", "must be at least 1s"),
        ("0.5s", "must be at least 1s"),
        ("1.0000001s", "finer than a microsecond"),
        ("9999999999d", "too long"),
    ],
)
def test_invalid_durations_say_why(text: str, reason: str) -> None:
    with pytest.raises(InvalidExpression, match=re.escape(f"invalid duration {text!r}: {reason}")):
        parse_duration(text)


# -- daylight saving -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("zone", "expression", "after", "expected"),
    [
        # New York, spring forward (8 March, 07:00Z): 02:00-03:00 local never happens.
        pytest.param(
            "America/New_York",
            "30 2 * * *",
            "2026-03-07T12:00Z",
            ["2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"],  # 03:00 EDT, then 02:30 EDT
            id="new-york-skipped-fires-as-the-clock-jumps",
        ),
        pytest.param(
            "America/New_York",
            "*/20 2 * * *",
            "2026-03-07T12:00Z",
            ["2026-03-08T07:00:00Z", "2026-03-09T06:00:00Z"],  # three wall times, one instant
            id="new-york-skipped-times-collapse",
        ),
        pytest.param(
            "America/New_York",
            "0 2,3 * * *",
            "2026-03-07T12:00Z",
            ["2026-03-08T07:00:00Z", "2026-03-09T06:00:00Z", "2026-03-09T07:00:00Z"],
            id="new-york-02:00-and-03:00-are-one-instant",
        ),
        pytest.param(
            "America/New_York",
            "30 1 * * *",
            "2026-03-07T12:00Z",
            ["2026-03-08T06:30:00Z", "2026-03-09T05:30:00Z"],  # 01:30 EST, 01:30 EDT
            id="new-york-before-the-gap",
        ),
        pytest.param(
            "America/New_York",
            "30 * * * *",
            "2026-03-08T05:00Z",
            ["2026-03-08T05:30:00Z", "2026-03-08T06:30:00Z", "2026-03-08T07:30:00Z"],
            id="new-york-every-hour-skips-nothing-real",  # 00:30, 01:30 EST, 03:30 EDT
        ),
        # New York, fall back (1 November, 06:00Z): 01:00-02:00 local happens twice.
        pytest.param(
            "America/New_York",
            "30 1 * * *",
            "2026-10-31T12:00Z",
            ["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"],  # 01:30 EDT only, then EST
            id="new-york-repeated-fires-first-instance",
        ),
        pytest.param(
            "America/New_York",
            "*/30 1 * * *",
            "2026-10-31T12:00Z",
            ["2026-11-01T05:00:00Z", "2026-11-01T05:30:00Z", "2026-11-02T06:00:00Z"],
            id="new-york-repeated-stretch-fires-once",
        ),
        pytest.param(
            "America/New_York",
            "30 * * * *",
            "2026-11-01T04:00Z",
            [
                "2026-11-01T04:30:00Z",
                "2026-11-01T05:30:00Z",
                "2026-11-01T06:30:00Z",
                "2026-11-01T07:30:00Z",
            ],  # 00:30 EDT, 01:30 EDT, 01:30 EST, 02:30 EST
            id="new-york-every-hour-fires-both-instances",
        ),
        # London, spring forward (29 March, 01:00Z): 01:00-02:00 local never happens.
        pytest.param(
            "Europe/London",
            "30 1 * * *",
            "2026-03-28T12:00Z",
            ["2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"],  # 02:00 BST, then 01:30 BST
            id="london-skipped-fires-as-the-clock-jumps",
        ),
        pytest.param(
            "Europe/London",
            "30 * * * *",
            "2026-03-28T23:00Z",
            ["2026-03-28T23:30:00Z", "2026-03-29T00:30:00Z", "2026-03-29T01:30:00Z"],
            id="london-every-hour-skips-nothing-real",  # 23:30, 00:30 GMT, 02:30 BST
        ),
        # London, fall back (25 October, 01:00Z): 01:00-02:00 local happens twice.
        pytest.param(
            "Europe/London",
            "30 1 * * *",
            "2026-10-24T12:00Z",
            ["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"],  # 01:30 BST only, then GMT
            id="london-repeated-fires-first-instance",
        ),
        pytest.param(
            "Europe/London",
            "30 * * * *",
            "2026-10-24T23:00Z",
            [
                "2026-10-24T23:30:00Z",
                "2026-10-25T00:30:00Z",
                "2026-10-25T01:30:00Z",
                "2026-10-25T02:30:00Z",
            ],  # 00:30 BST, 01:30 BST, 01:30 GMT, 02:30 GMT
            id="london-every-hour-fires-both-instances",
        ),
        # Lord Howe, fall back 30 minutes (15:00Z on 4 April): 01:30-02:00 happens twice.
        pytest.param(
            "Australia/Lord_Howe",
            "45 1 * * *",
            "2026-04-04T12:00Z",
            ["2026-04-04T14:45:00Z", "2026-04-05T15:15:00Z"],  # 01:45 LHDT, then LHST
            id="lord-howe-repeated-fires-first-instance",
        ),
        pytest.param(
            "Australia/Lord_Howe",
            "15 1 * * *",
            "2026-04-04T12:00Z",
            ["2026-04-04T14:15:00Z", "2026-04-05T14:45:00Z"],  # 01:15 is not repeated
            id="lord-howe-outside-the-repeat",
        ),
        pytest.param(
            "Australia/Lord_Howe",
            "15,45 * * * *",
            "2026-04-04T14:00Z",  # 01:00 LHDT
            [
                "2026-04-04T14:15:00Z",
                "2026-04-04T14:45:00Z",
                "2026-04-04T15:15:00Z",
                "2026-04-04T15:45:00Z",
                "2026-04-04T16:15:00Z",
            ],
            # 01:15 LHDT, 01:45 LHDT, 01:45 LHST, 02:15 LHST, 02:45 LHST
            id="lord-howe-every-hour-fires-both-instances",
        ),
        # Lord Howe, spring forward 30 minutes (15:30Z on 3 October): 02:00-02:30 is skipped.
        pytest.param(
            "Australia/Lord_Howe",
            "15 2 * * *",
            "2026-10-03T12:00Z",
            ["2026-10-03T15:30:00Z", "2026-10-04T15:15:00Z"],  # 02:30 LHDT, then 02:15 LHDT
            id="lord-howe-skipped-fires-as-the-clock-jumps",
        ),
        pytest.param(
            "Australia/Lord_Howe",
            "45 2 * * *",
            "2026-10-03T12:00Z",
            ["2026-10-03T15:45:00Z", "2026-10-04T15:45:00Z"],  # 02:45 exists (LHDT)
            id="lord-howe-after-the-gap",
        ),
        pytest.param(
            "Australia/Lord_Howe",
            "15,45 * * * *",
            "2026-10-03T14:30Z",  # 01:00 LHST
            [
                "2026-10-03T14:45:00Z",
                "2026-10-03T15:15:00Z",
                "2026-10-03T15:45:00Z",
                "2026-10-03T16:15:00Z",
            ],
            # 01:15 LHST, 01:45 LHST, (02:15 skipped), 02:45 LHDT, 03:15 LHDT
            id="lord-howe-every-hour-skips-nothing-real",
        ),
    ],
)
def test_daylight_saving(zone: str, expression: str, after: str, expected: list[str]) -> None:
    assert upcoming(expression, after, zone, count=len(expected)) == expected


@pytest.mark.parametrize(
    ("zone", "expression", "after", "expected"),
    [
        # From inside the first pass of New York's repeated hour (01:40 EDT): the replayed
        # 01:30 EST comes before 02:30 EST.
        ("America/New_York", "30 * * * *", "2026-11-01T05:40Z", "2026-11-01T06:30:00Z"),
        ("America/New_York", "50 * * * *", "2026-11-01T05:40Z", "2026-11-01T05:50:00Z"),
        # From inside the second pass (01:40 EST).
        ("America/New_York", "30 * * * *", "2026-11-01T06:40Z", "2026-11-01T07:30:00Z"),
        ("America/New_York", "50 * * * *", "2026-11-01T06:40Z", "2026-11-01T06:50:00Z"),
        ("America/New_York", "50 1 * * *", "2026-11-01T06:40Z", "2026-11-02T06:50:00Z"),
        ("America/New_York", "0 2 * * *", "2026-11-01T06:40Z", "2026-11-01T07:00:00Z"),
        # Exactly at the jump: 03:00 EDT has fired as 02:30's occurrence.
        ("America/New_York", "30 2 * * *", "2026-03-08T07:00Z", "2026-03-09T06:30:00Z"),
        ("America/New_York", "0 3 * * *", "2026-03-08T06:59:59Z", "2026-03-08T07:00:00Z"),
        # Lord Howe, second pass (01:40 LHST = 15:10Z).
        ("Australia/Lord_Howe", "45 1 * * *", "2026-04-04T15:10Z", "2026-04-05T15:15:00Z"),
        ("Australia/Lord_Howe", "45 * * * *", "2026-04-04T15:10Z", "2026-04-04T15:15:00Z"),
        ("Australia/Lord_Howe", "5 2 * * *", "2026-04-04T15:10Z", "2026-04-04T15:35:00Z"),
    ],
)
def test_daylight_saving_from_inside_a_transition(
    zone: str, expression: str, after: str, expected: str
) -> None:
    assert upcoming(expression, after, zone, count=1) == [expected]


TRANSITIONS = [
    ("America/New_York", "2026-03-08T07:00Z", timedelta(hours=1)),
    ("America/New_York", "2026-11-01T06:00Z", timedelta(hours=-1)),
    ("Europe/London", "2026-03-29T01:00Z", timedelta(hours=1)),
    ("Europe/London", "2026-10-25T01:00Z", timedelta(hours=-1)),
    ("Australia/Lord_Howe", "2026-04-04T15:00Z", timedelta(minutes=-30)),
    ("Australia/Lord_Howe", "2026-10-03T15:30Z", timedelta(minutes=30)),
]


@pytest.mark.parametrize(("zone", "instant", "shift"), TRANSITIONS)
def test_the_transitions_used_above_are_the_zones_own(
    zone: str, instant: str, shift: timedelta
) -> None:
    tz, moment = load_zone(zone), at(instant)
    before, after = (moment - timedelta(seconds=1)).astimezone(tz), moment.astimezone(tz)
    assert after.utcoffset() - before.utcoffset() == shift  # type: ignore[operator]


WallTest = Callable[[datetime], bool]
ORACLE_EXPRESSIONS: list[tuple[str, WallTest]] = [
    ("30 * * * *", lambda w: w.minute == 30),
    ("15,45 * * * *", lambda w: w.minute in (15, 45)),
    ("*/10 * * * *", lambda w: w.minute % 10 == 0),
    ("30 1 * * *", lambda w: (w.hour, w.minute) == (1, 30)),
    ("15,45 2 * * *", lambda w: w.hour == 2 and w.minute in (15, 45)),
    ("*/15 1-3 * * *", lambda w: 1 <= w.hour <= 3 and w.minute % 15 == 0),
    ("0 */2 * * *", lambda w: w.hour % 2 == 0 and w.minute == 0),
]


def oracle(expression: str, matches: WallTest, tz: ZoneInfo, start: datetime) -> list[datetime]:
    """The design's rules, minute by minute over 60 hours of real time from ``start``.

    Hour ``*``: an instant fires when its clock reading matches. Otherwise an instant fires
    when the clock first reaches a matching wall time (skipped or not) at that instant.
    """
    every_hour = expression.split()[1] == "*"
    minute = timedelta(minutes=1)
    found, reached = [], start.astimezone(tz).replace(tzinfo=None)
    for step in range(1, 60 * 60 + 1):
        moment = start + step * minute
        reading = moment.astimezone(tz).replace(tzinfo=None)
        if every_hour:
            newly = [reading]
        else:
            newly = []
            while reached < reading:
                reached += minute
                newly.append(reached)
        if any(matches(wall) for wall in newly):
            found.append(moment)
    return found


@pytest.mark.parametrize(("zone", "instant", "shift"), TRANSITIONS)
@pytest.mark.parametrize(("expression", "matches"), ORACLE_EXPRESSIONS)
def test_daylight_saving_matches_the_rules_minute_by_minute(
    zone: str, instant: str, shift: timedelta, expression: str, matches: WallTest
) -> None:
    tz, start = load_zone(zone), at(instant) - timedelta(hours=24)
    expected = oracle(expression, matches, tz, start)
    timetable = CronTimetable.parse(expression)
    end = start + timedelta(hours=60)
    assert occurrences_between(timetable, start, end, tz, limit=1000) == expected
    # Starting anywhere, including inside a skipped or repeated stretch.
    for offset in range(0, 6 * 60 * 60, 7 * 60 + 13):
        moment = at(instant) - timedelta(hours=3) + timedelta(seconds=offset)
        assert timetable.next_after(moment, tz) == next(t for t in expected if t > moment)


# -- ranges and previews -------------------------------------------------------------------


def test_occurrences_between_bounds_and_limit() -> None:
    timetable = CronTimetable.parse("0 * * * *")
    start, end = at("2026-01-01T00:00Z"), at("2026-01-01T03:00Z")
    assert occurrences_between(timetable, start, end, UTC_ZONE, limit=10) == [
        at("2026-01-01T01:00Z"),
        at("2026-01-01T02:00Z"),
        at("2026-01-01T03:00Z"),
    ]
    assert occurrences_between(timetable, start, end, UTC_ZONE, limit=2) == [
        at("2026-01-01T01:00Z"),
        at("2026-01-01T02:00Z"),
    ]
    assert occurrences_between(timetable, end, end, UTC_ZONE, limit=10) == []


def test_preview_shows_the_schedules_zone() -> None:
    found = preview(
        "30 2 * * *", time_zone="America/New_York", start=at("2026-03-07T00:00Z"), count=3
    )
    assert [t.isoformat() for t in found] == [
        "2026-03-07T02:30:00-05:00",
        "2026-03-08T03:00:00-04:00",
        "2026-03-09T02:30:00-04:00",
    ]


def test_preview_of_a_fixed_rate() -> None:
    found = preview("@every 90m", time_zone="Europe/London", start=at("2026-03-28T23:00Z"), count=3)
    # 2026-03-29T00:00Z is a multiple of 90 minutes after the epoch.
    assert [t.isoformat() for t in found] == [
        "2026-03-29T00:00:00+00:00",
        "2026-03-29T02:30:00+01:00",
        "2026-03-29T04:00:00+01:00",
    ]


def test_preview_uses_the_seed_and_validates() -> None:
    found = preview("H H * * *", start=at("2026-01-01T00:00Z"), count=1, seed="billing/nightly")
    assert [t.isoformat() for t in found] == ["2026-01-01T08:53:00+00:00"]
    with pytest.raises(InvalidExpression, match="unknown time zone 'Mars/Olympus'"):
        preview("* * * * *", time_zone="Mars/Olympus", start=at("2026-01-01T00:00Z"), count=1)
    with pytest.raises(InvalidExpression, match="invalid duration 'soon'"):
        preview("@every soon", start=at("2026-01-01T00:00Z"), count=1)


@pytest.mark.parametrize(
    ("expression", "meant"),
    [
        ("every 30s", "30s"),
        ("@every 1h30m", "1h30m"),
        ("  EVERY 2 hours ", "2h"),
        ("90s", "90s"),
        ("every 1.5 min", "1.5m"),
        ("*/5 * * * *", None),
        ("@hourly", None),
        ("5", None),
        ("every", None),
        ("every 30 parsecs", None),
    ],
)
def test_an_interval_written_for_a_cron_expression_is_recognised(
    expression: str, meant: str | None
) -> None:
    assert interval_in(expression) == meant
