"""The console in a real browser: Debian's headless Chromium driven by Playwright. Log in,
see a schedule fire (fired by the maintenance code at a pinned instant: no waiting), cancel a
job and retry a dead one through the pages, and find the audit entries; at 1400 and 1000 px,
no table cell's word breaks across lines (measured with each word's client rects). Each main
page is saved as a screenshot under ``$TICKWORK_ARTIFACTS/screenshots`` (default
``artifacts/``)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest
from aiohttp.test_utils import TestClient
from playwright.async_api import Browser, Page, async_playwright, expect

import tickwork
from tests.admin import admin_helpers
from tests.admin.admin_helpers import XSS
from tests.support import binaries, helpers
from tests.support.schedule_helpers import every
from tickwork.clock import SettableClock
from tickwork.maintenance import firing

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = Path(os.environ.get("TICKWORK_ARTIFACTS") or ROOT / "artifacts") / "screenshots"


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=str(binaries.chromium()),
            headless=True,
            args=["--no-sandbox", "--disable-background-networking"],
        )
        yield launched
        await launched.close()


@pytest.fixture
async def page(browser: Browser, client: TestClient) -> AsyncIterator[Page]:
    """A logged-in page (as the operator); a dialog (a script that ran) fails the test."""
    context = await browser.new_context(
        base_url=str(client.make_url("")), viewport={"width": 1400, "height": 900}
    )
    opened = await context.new_page()
    dialogs: list[str] = []
    opened.on("dialog", lambda dialog: dialogs.append(dialog.message))
    await opened.goto("/jobs")
    await expect(opened).to_have_title("Log in · tickwork")
    await opened.get_by_label("Name").fill("alice")
    await opened.get_by_label("Secret").fill(admin_helpers.OPERATOR_SECRET)
    await opened.get_by_role("button", name="Log in").click()
    await expect(opened).to_have_title("Jobs · tickwork")  # back where it was going
    yield opened
    await context.close()
    assert dialogs == [], "a script ran in the console"


async def shoot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


async def test_see_a_schedule_fire(
    page: Page,
    app: tickwork.App,
    aconn: psycopg.AsyncConnection,
    conn: psycopg.Connection,
    clock: SettableClock,
) -> None:
    app.sync_schedules("billing", [every("tick", 60)])
    admin_helpers.register_worker(conn, "worker-1", now=clock.now(), namespaces=["billing"])
    await page.goto("/")
    await expect(page.get_by_role("cell", name="worker-1")).to_be_visible()
    await shoot(page, "overview")

    await page.get_by_role("navigation").get_by_role("link", name="Schedules").click()
    await page.get_by_role("link", name="tick", exact=True).click()
    await expect(page).to_have_title("Schedule billing/tick · tickwork")
    await expect(page.get_by_text("No jobs match.")).to_be_visible()

    clock.set(helpers.at(60))
    report = await firing.run_once(aconn, ["billing"], clock.now())
    assert report.fired == 1
    (job,) = app.list_jobs()

    await page.reload()
    history = page.locator("table").filter(has_text="picked by")
    await expect(history.get_by_role("link", name=f"#{job.id}")).to_be_visible()
    await expect(page.get_by_text("2030-01-01 00:01:00Z").first).to_be_visible()
    await shoot(page, "schedule")
    await page.goto("/schedules")
    await shoot(page, "schedules")


async def test_cancel_a_job_and_retry_a_dead_one(
    page: Page, app: tickwork.App, conn: psycopg.Connection
) -> None:
    waiting = app.enqueue("report.build", {"note": XSS}, run_at=helpers.at(3600))
    dead = app.enqueue("report.build", {"n": 2})
    admin_helpers.make_dead(conn, dead, error=f"ValueError: {XSS}")

    await page.goto(f"/jobs/{waiting}")
    payload = page.locator("pre.payload")
    await expect(payload).to_contain_text("<img src=x onerror=alert(1)>")  # text, not run
    await page.get_by_label("Reason").last.fill("not needed any more")
    await page.get_by_role("button", name="Cancel job").click()
    await expect(page.get_by_role("status")).to_have_text("Done.")
    await expect(page.locator(".status").first).to_have_text("cancelled")
    audit = page.locator("table").filter(has_text="request id")
    await expect(audit.get_by_role("cell", name="not needed any more")).to_be_visible()
    await expect(audit.get_by_role("cell", name="alice")).to_be_visible()
    await shoot(page, "job")

    await page.goto("/jobs?status=dead")
    await shoot(page, "jobs")
    await page.get_by_role("link", name=f"#{dead}").click()
    await page.get_by_label("Reason").fill("fixed the input")
    await page.get_by_role("button", name="Retry job").click()
    await expect(page.get_by_role("status")).to_have_text("Done.")
    await expect(page.locator(".status").first).to_have_text("available")
    assert app.get_job(dead).status.value == "available"

    await page.get_by_role("navigation").get_by_role("link", name="Audit").click()
    entries = page.locator("tbody tr")
    await expect(entries).to_have_count(2)
    await expect(entries.first).to_contain_text("retry")
    await expect(entries.first).to_contain_text("fixed the input")
    await expect(entries.last).to_contain_text("cancel")
    await shoot(page, "audit")


async def test_limit_a_queue_through_the_overview_form(
    page: Page, app: tickwork.App, conn: psycopg.Connection
) -> None:
    app.enqueue("report.build", {}, queue="reports")
    await page.goto("/")
    form = page.locator("form").filter(has=page.get_by_role("button", name="Limit queue"))
    await form.get_by_label("queue", exact=True).fill("reports")
    await form.get_by_label("Max running").fill("2")
    await form.get_by_label("Rate", exact=True).fill("100/min")
    await form.get_by_label("Reason").fill("the ledger is slow")
    await form.get_by_role("button", name="Limit queue").click()
    assert app.list_limits() == []  # the confirmation box is required: the browser held it
    await form.get_by_label("I confirm").check()
    await form.get_by_role("button", name="Limit queue").click()
    await expect(page.get_by_role("status")).to_have_text("Done.")
    queues = page.locator("table").filter(has_text="due (backlog)")
    await expect(queues.get_by_role("row").filter(has_text="reports")).to_contain_text(
        "0/2 running · 0 of 100/min started"
    )
    await shoot(page, "limits")
    limits = page.locator("table").filter(has_text="use now")
    await limits.get_by_label("I confirm").check()
    await limits.get_by_role("button", name="Remove queue limit").click()
    await expect(page.get_by_role("status")).to_have_text("Done.")
    assert app.list_limits() == []
    records = [(r["action"], r["reason"]) for r in admin_helpers.audit_rows(conn)]
    assert records == [("limit", "the ledger is slow"), ("unlimit", None)]


async def test_a_tenant_sees_and_triggers_only_its_namespace(
    browser: Browser, client: TestClient, app: tickwork.App
) -> None:
    app.sync_schedules("team-a", [every("sweep", 60)])
    app.sync_schedules("team-b", [every("hidden", 60)])
    context = await browser.new_context(base_url=str(client.make_url("")))
    try:
        page = await context.new_page()
        await page.goto("/schedules")
        await page.get_by_label("Name").fill("ann")
        await page.get_by_label("Secret").fill(admin_helpers.TEAM_A_SECRET)
        await page.get_by_role("button", name="Log in").click()
        await expect(page).to_have_title("Schedules · tickwork")
        await expect(page.get_by_text("ann (operator of team-a)")).to_be_visible()
        await expect(page.get_by_role("link", name="sweep", exact=True)).to_be_visible()
        await expect(page.get_by_text("hidden")).to_have_count(0)
        await shoot(page, "tenant-schedules")

        await page.get_by_role("link", name="sweep", exact=True).click()
        await page.get_by_role("button", name="Trigger now").click()
        await expect(page.get_by_role("status")).to_have_text("Done.")

        forbidden = await page.goto("/schedules/team-b/hidden")
        assert forbidden is not None and forbidden.status == 403
        await expect(page.get_by_text("outside your schedule namespaces")).to_be_visible()
        await shoot(page, "tenant-forbidden")
    finally:
        await context.close()
    (job,) = app.list_jobs()
    assert job.schedule is not None and job.schedule.namespace == "team-a"


WORDS_SPLIT = """() => {
  // Each word of each table cell: a word whose client rects lie on two lines is split.
  const split = [];
  for (const cell of document.querySelectorAll("td, th")) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const word of node.data.matchAll(/\\S+/g)) {
        const range = document.createRange();
        range.setStart(node, word.index);
        range.setEnd(node, word.index + word[0].length);
        const rects = [...range.getClientRects()].filter((r) => r.width > 0);
        const lines = new Set(rects.map((r) => Math.round(r.top)));
        if (lines.size > 1) split.push(word[0]);
      }
    }
  }
  return split;
}"""
"""The words of table cells that break across lines (hidden text has no rects: not counted)."""


CHART_BARS = """() => [...document.querySelectorAll('svg.chart')].map(svg =>
    [...svg.querySelectorAll('rect')].filter(r => {
        const box = r.getBoundingClientRect();
        return box.width > 0 && box.height > 0;
    }).length)"""
"""Per chart on the page, how many of its bars have a painted, non-empty box."""


@pytest.mark.parametrize("width", [1400, 1000])
async def test_table_cells_never_break_inside_a_word(
    page: Page, app: tickwork.App, conn: psycopg.Connection, clock: SettableClock, width: int
) -> None:
    ids = admin_helpers.populate(app, conn, clock.now())
    long = app.enqueue("examples.report.quarterly_rollup", {"n": 8}, queue="reports-batch")
    trace = (
        "Traceback (most recent call last):\n"
        '  File "/srv/app/examples/report.py", line 12, in build\n'
        "    raise ValueError(msg)\n"
        "ValueError: the quarterly rollup found no ledger rows for tenant acme-corporation"
    )
    admin_helpers.make_dead(conn, long, error=trace)
    app.set_limit("queue", "reports-batch", max_running=3, rate="100/min", rate_key="customer")
    app.set_limit("namespace", "billing", max_running=20, weight=3)
    for minute in range(0, 180, 7):  # the overview's charts, for the screenshots
        for i in range(minute % 5 + 1):  # lags differ: one occurrence per schedule and instant
            admin_helpers.finish(app, conn, "succeeded", minute * 60 + 5, lag=minute % 11 + i)
        admin_helpers.finish(app, conn, "dead" if minute % 3 else "cancelled", minute * 60 + 5)
    await page.set_viewport_size({"width": width, "height": 900})
    for name, url in (
        ("overview", "/"),
        ("schedules", "/schedules"),
        ("schedule", "/schedules/billing/nightly"),
        ("jobs", "/jobs"),
        ("job", f"/jobs/{ids['running']}"),
        ("audit", "/audit"),
    ):
        await page.goto(url)
        await expect(page.locator("h1")).to_be_visible()
        await shoot(page, f"wrap-{name}-{width}")
        assert await page.evaluate(WORDS_SPLIT) == [], f"{url} at {width} px"
        if name == "overview":  # both charts drawn, with bars the browser really paints
            painted = await page.evaluate(CHART_BARS)
            assert len(painted) == 2 and all(bars > 10 for bars in painted), painted
