"""The console's schedule page with a calendar: the next occurrences leave out what
``spec.exclude`` excludes and stop at ``spec.endTime``, the calendar is named, and a schedule
past its end says it has ended."""

from __future__ import annotations

import re

import psycopg
from aiohttp.test_utils import TestClient

import tickwork
from tests.admin import admin_helpers
from tests.support.helpers import T0
from tests.support.schedule_helpers import cron

NS = "calendars"


async def get_page(client: TestClient, path: str) -> str:
    await admin_helpers.log_in(client, "victor", admin_helpers.VIEWER_SECRET)
    response = await client.get(path)
    assert response.status == 200, await response.text()
    return await response.text()


async def test_next_occurrences_follow_the_calendar(
    app: tickwork.App, client: TestClient, conn: psycopg.Connection
) -> None:
    # T0 is Tuesday 2030-01-01 00:00 UTC; Wednesday the 2nd and the weekend are excluded.
    weekdays = cron(
        "weekdays",
        "0 9 * * *",
        exclude=("* * * * 0,6", "2030-01-02"),
        end_time=T0.replace(day=8, hour=23),
    )
    app.sync_schedules(NS, [weekdays])
    page = await get_page(client, f"/schedules/{NS}/weekdays")
    upcoming = re.search(r'<ol class="upcoming">(.*?)</ol>', page)
    assert upcoming is not None
    times = re.findall(r'<time datetime="([^"]+)">', upcoming[1])
    assert times == [
        f"2030-01-{day:02}T09:00:00+00:00" for day in (1, 3, 4, 7, 8)
    ]  # then endTime: fewer than ten
    assert "Calendar: not on * * * * 0,6, 2030-01-02; until 2030-01-08T23:00:00+00:00." in page


async def test_a_schedule_past_its_end_says_it_has_ended(
    app: tickwork.App, client: TestClient, conn: psycopg.Connection
) -> None:
    app.sync_schedules(NS, [cron("over", "0 9 * * *", end_time=T0.replace(year=2029))])
    page = await get_page(client, f"/schedules/{NS}/over")
    assert "The schedule has ended (spec.endTime): the next run is at" in page
    assert '<ol class="upcoming">' not in page
