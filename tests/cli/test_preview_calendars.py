"""``tickwork preview`` with a calendar (--exclude, --start-time, --end-time): the kept
occurrences, as the schedule fires them; bad values refused with the flag named, exit 2."""

from __future__ import annotations

import json

import pytest

from tests.cli.test_cli import ok, one_line_error, tickwork_cmd

BERLIN = ("--timezone", "Europe/Berlin", "--from", "2026-12-23T15:00Z")


def test_preview_leaves_out_weekends_lunch_and_holidays_in_the_zone() -> None:
    result = tickwork_cmd(
        "preview",
        "*/30 8-17 * * *",
        *BERLIN,
        "--exclude",
        "* * * * 0,6",
        "--exclude",
        "* 12 * * *",
        "--exclude",
        "2026-12-24",
        "--count",
        "8",
    )
    assert ok(result).splitlines() == [
        "2026-12-23T16:30:00+01:00  Wed  CET",
        "2026-12-23T17:00:00+01:00  Wed  CET",
        "2026-12-23T17:30:00+01:00  Wed  CET",
        "2026-12-25T08:00:00+01:00  Fri  CET",  # the 24th excluded
        "2026-12-25T08:30:00+01:00  Fri  CET",
        "2026-12-25T09:00:00+01:00  Fri  CET",
        "2026-12-25T09:30:00+01:00  Fri  CET",
        "2026-12-25T10:00:00+01:00  Fri  CET",
    ]


def test_preview_stops_at_the_end_time_and_says_so() -> None:
    result = tickwork_cmd(
        "preview",
        "0 9 * * *",
        "--from",
        "2026-12-23T00:00Z",
        "--start-time",
        "2026-12-24T09:00Z",
        "--end-time",
        "2026-12-25T09:00Z",
        "--count",
        "5",
        "-o",
        "json",
    )
    assert json.loads(ok(result)) == ["2026-12-24T09:00:00+00:00", "2026-12-25T09:00:00+00:00"]
    assert "no occurrence after --end-time 2026-12-25T09:00:00+00:00" in result.stderr


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--exclude", "* * * * *"], "--exclude: excludes"),
        (["--exclude", "@daily"], "--exclude: '@daily': a macro names an instant"),
        (["--exclude", "2026-02-30"], "--exclude: '2026-02-30' is not a date"),
        (["--exclude", "x" * 200], "--exclude: must be 1 to 128 characters"),
        (["--exclude", "* * * * 9"], "--exclude: day-of-week field: 9 is out of range"),
        (["--start-time", "2026-12-25"], "--start-time: '2026-12-25' has no UTC offset"),
        (["--end-time", "soon"], "--end-time: 'soon' is not an ISO 8601 time"),
        (
            ["--start-time", "2026-12-25T10:00Z", "--end-time", "2026-12-25T09:00Z"],
            "--end-time: must be after --start-time",
        ),
        (["--end-time", "9999-12-31T00:00Z"], "--end-time: 9999-12-31T00:00:00+00:00: the year"),
    ],
)
def test_bad_calendar_flags_are_refused_naming_the_flag(flags: list[str], expected: str) -> None:
    line = one_line_error(tickwork_cmd("preview", "0 9 * * *", *flags), 2)
    assert line.startswith(f"tickwork: error: {expected}"), line
