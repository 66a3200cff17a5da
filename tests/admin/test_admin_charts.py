"""The overview's charts: server-rendered SVG of the jobs finished in the last 3 hours per
minute (the last 180 minutes, the clock's own last) by outcome, and of the scheduled jobs'
start lag; narrowed by queue and namespace; empty-safe. Jobs are finished by hand at chosen
instants before the test's clock."""

from __future__ import annotations

import re
from typing import Any

import psycopg
from aiohttp.test_utils import TestClient

import tickwork
from tests.admin import admin_helpers
from tests.admin.admin_helpers import OPERATOR, TEAM_A

_RECT = re.compile(r"<rect><title>([^<]*)</title></rect>|<rect ([^>]*)>")
_ATTR = re.compile(r'([a-z]+)="([^"]*)"')


def bars(page: str, cls: str) -> list[dict[str, str]]:
    """The attributes of the page's bars of class ``bar cls``, with their titles."""
    found = re.findall(rf'<rect ([^>]*class="bar {cls}"[^>]*)><title>([^<]*)</title>', page)
    return [dict(_ATTR.findall(attrs), title=title) for attrs, title in found]


async def overview(client: TestClient, query: str = "") -> str:
    response = await client.get("/" + query, headers=OPERATOR)
    assert response.status == 200, await response.text()
    return await response.text()


async def test_the_charts_draw_the_finished_jobs_per_minute_and_the_lag(
    app: tickwork.App, client: TestClient, conn: psycopg.Connection[Any]
) -> None:
    for _ in range(3):
        admin_helpers.finish(app, conn, "succeeded", 10 * 60 - 5)  # 23:50Z: slot 169 of 180
    admin_helpers.finish(app, conn, "dead", 10 * 60 - 5)
    admin_helpers.finish(app, conn, "cancelled", 2 * 60 - 5, queue="fast")  # 23:58Z: slot 177
    admin_helpers.finish(app, conn, "succeeded", 2 * 60 - 5, queue="fast", lag=30)
    admin_helpers.finish(app, conn, "succeeded", 2 * 60 - 5, lag=90)
    admin_helpers.finish(app, conn, "succeeded", 4 * 3600)  # before the window
    page = await overview(client)

    succeeded = bars(page, "succeeded")
    assert [(b["x"], b["height"]) for b in succeeded] == [("676", "90.0"), ("708", "60.0")]
    assert succeeded[0]["title"] == "23:50Z: 3 succeeded"
    (dead,) = bars(page, "dead")
    assert (dead["x"], dead["y"], dead["height"]) == ("676", "0.0", "30.0")  # on top: peak 4
    (cancelled,) = bars(page, "cancelled")
    assert (cancelled["x"], cancelled["height"], cancelled["y"]) == ("708", "30.0", "30.0")
    (lag,) = bars(page, "lag")
    assert (lag["x"], lag["height"]) == ("708", "120.0")
    assert lag["title"] == "23:58Z: worst 90.0 s, mean 60.0 s"
    assert ">21:01Z</text>" in page and ">00:01Z</text>" in page

    fast = await overview(client, "?queue=fast")
    assert [b["height"] for b in bars(fast, "succeeded")] == ["60.0"]
    assert [b["y"] for b in bars(fast, "cancelled")] == ["0.0"]  # peak 2: the top half
    assert [b["title"] for b in bars(fast, "lag")] == ["23:58Z: worst 30.0 s, mean 30.0 s"]
    billing = await overview(client, f"?namespace={admin_helpers.BILLING}")
    assert [b["title"] for b in bars(billing, "succeeded")] == ["23:58Z: 2 succeeded"]

    response = await client.get("/api/overview?queue=fast", headers=OPERATOR)
    slots = (await response.json())["activity"]["slots"]
    assert [(s["slot"], s["succeeded"], s["cancelled"], s["max_lag"]) for s in slots] == [
        (177, 1, 1, 30.0)
    ]


async def test_the_charts_are_empty_safe_and_scoped(
    app: tickwork.App, client: TestClient, conn: psycopg.Connection[Any]
) -> None:
    page = await overview(client)
    assert "<rect" not in page and "No job finished in this window." in page
    assert "No scheduled job finished in this window." in page

    admin_helpers.finish(app, conn, "succeeded", 60)  # no schedule: no lag, and not team-a's
    page = await overview(client)
    assert len(bars(page, "succeeded")) == 1 and bars(page, "lag") == []
    assert "No scheduled job finished in this window." in page

    response = await client.get("/", headers=TEAM_A)
    assert "<rect" not in await response.text()
    response = await client.get(f"/?namespace={admin_helpers.BILLING}", headers=TEAM_A)
    assert response.status == 403
