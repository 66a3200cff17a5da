"""The console draws the graph of a run on a job's page: its parents and dependents at any
distance, each a link, statuses shown, kinds escaped, another tenant's jobs never drawn even
when an edge (written by hand) points at one, and a large fan-out cut to the nearest jobs."""

from __future__ import annotations

import re
from typing import Any

import psycopg
from aiohttp.test_utils import TestClient

import tickwork
from tests.admin import admin_helpers
from tickwork.admin import reads


async def _page(client: TestClient, job_id: int) -> str:
    await admin_helpers.log_in(client, "victor", admin_helpers.VIEWER_SECRET)
    response = await client.get(f"/jobs/{job_id}")
    assert response.status == 200, await response.text()
    return await response.text()


async def test_a_job_page_draws_its_run(app: tickwork.App, client: TestClient) -> None:
    root = app.enqueue("etl.<script>alert(1)</script>")
    middle = app.enqueue_many("etl.part", [{}, {}], after=[root])
    join = app.enqueue("etl.join", after=middle)
    page = await _page(client, middle[0])
    assert "Run graph" in page
    svg = re.search(r"<svg.*?</svg>", page, re.S)
    assert svg is not None
    for job_id in (root, *middle, join):
        assert f'href="/jobs/{job_id}"' in svg.group(0), "every job of the run is drawn"
    assert "<script>" not in page
    assert "&lt;script&gt;" in page
    assert svg.group(0).count("<line") == 4, "one line per edge"
    assert "waits for" in page and "waited for by" in page

    plain = await _page(client, app.enqueue("etl.alone"))
    assert "Run graph" not in plain


async def test_another_tenants_job_is_never_drawn(
    app: tickwork.App, client: TestClient, conn: psycopg.Connection[Any]
) -> None:
    ours = app.enqueue("etl.ours")
    theirs = conn.execute(
        "INSERT INTO tickwork.jobs (kind, schedule_namespace, schedule_name)"
        " VALUES ('theirs.secret', 'tenant-b', 's') RETURNING id"
    ).fetchone()
    assert theirs is not None
    child = app.enqueue("etl.child", after=[ours])
    conn.execute(
        "INSERT INTO tickwork.job_dependencies (job_id, parent_id) VALUES (%s, %s)",
        (child, theirs[0]),
    )
    page = await _page(client, child)
    assert "theirs.secret" not in page
    assert f'href="/jobs/{theirs[0]}"' not in page


async def test_a_large_fan_out_is_cut_to_the_nearest_jobs(
    app: tickwork.App, client: TestClient
) -> None:
    root = app.enqueue("fan.root")
    children = app.enqueue_many("fan.child", [{}] * 300, after=[root])
    page = await _page(client, root)
    assert f"Only the {reads.GRAPH_JOBS} jobs nearest to this one are drawn." in page
    svg = re.search(r"<svg.*?</svg>", page, re.S)
    assert svg is not None
    assert svg.group(0).count("<rect") == reads.GRAPH_JOBS
    assert f'href="/jobs/{children[0]}"' in page
