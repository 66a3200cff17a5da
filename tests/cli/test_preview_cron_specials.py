"""``tickwork preview`` shows cron's day specials (``L``, ``W``, ``#``) and refuses ``CRON_TZ=``."""

from __future__ import annotations

import json

from tests.cli.test_cli import ok, one_line_error, tickwork_cmd


def test_preview_shows_last_nearest_and_nth_days() -> None:
    last_friday = tickwork_cmd(
        "preview", "0 9 * * 5L", "--from", "2026-01-01T00:00Z", "--count", "3"
    )
    assert ok(last_friday).splitlines() == [
        "2026-01-30T09:00:00+00:00  Fri  UTC",
        "2026-02-27T09:00:00+00:00  Fri  UTC",
        "2026-03-27T09:00:00+00:00  Fri  UTC",
    ]
    # 1 August 2026 is a Saturday: 1W is Monday the 3rd; LW the last weekday.
    nearest = tickwork_cmd(
        "preview", "0 9 1W,LW 7-8 *", "--from", "2026-07-01T12:00Z", "--count", "3", "-o", "json"
    )
    assert json.loads(ok(nearest)) == [
        "2026-07-31T09:00:00+00:00",
        "2026-08-03T09:00:00+00:00",
        "2026-08-31T09:00:00+00:00",
    ]


def test_preview_of_a_special_day_across_daylight_saving() -> None:
    # New York springs forward on the second Sunday of March: 02:30 fires at 03:00 EDT.
    args = ("30 2 * 3 SUN#2", "--timezone", "America/New_York", "--from", "2026-01-01T00:00Z")
    assert ok(tickwork_cmd("preview", *args, "--count", "2")).splitlines() == [
        "2026-03-08T03:00:00-04:00  Sun  EDT",
        "2027-03-14T03:00:00-04:00  Sun  EDT",
    ]


def test_preview_refuses_specials_it_cannot_read_and_zone_prefixes() -> None:
    error = one_line_error(tickwork_cmd("preview", "0 0 L/2 * *"), 2)
    assert error.startswith("tickwork: error: EXPR: day-of-month field: cannot read 'L/2'")
    error = one_line_error(tickwork_cmd("preview", "CRON_TZ=UTC 0 3 * * *"), 2)
    assert error.startswith("tickwork: error: EXPR: CRON_TZ or TZ used in ")
    assert "spec.timeZone" in error and "--timezone" in error
