"""The console's job page and API show what a job's task returned and reported: the progress
of a running job (bar, fraction, message, when and by which attempt), the result of a
succeeded one, and why a result was not kept. A task's text is inert in the page (escaped),
and the API carries it as it is."""

from __future__ import annotations

from typing import Any

import psycopg
from aiohttp.test_utils import TestClient

import tickwork
from tests.admin import admin_helpers
from tests.admin.admin_helpers import VIEWER, XSS
from tests.support import helpers
from tickwork.db import jobs as jobs_db
from tickwork.db import results as results_db
from tickwork.db import store
from tickwork.model import Job


async def _json(client: TestClient, path: str) -> Any:
    response = await client.get(path, headers=VIEWER)
    assert response.status == 200, await response.text()
    return await response.json()


async def _page(client: TestClient, path: str) -> str:
    await admin_helpers.log_in(client, "victor", admin_helpers.VIEWER_SECRET)
    response = await client.get(path)
    assert response.status == 200, await response.text()
    return await response.text()


def _running(app: tickwork.App, conn: psycopg.Connection, payload: Any) -> Job:
    app.enqueue("k.results", payload)
    [job] = helpers.claim(conn, kinds=["k.results"], limit=1)
    return job


async def test_the_job_page_shows_progress_then_the_result(
    client: TestClient, app: tickwork.App, conn: psycopg.Connection
) -> None:
    job = _running(app, conn, {"n": 1})
    report = {"fraction": 0.4, "message": f"copied 4 of 10 tables {XSS}", "attempt": 1}
    assert store.run(conn, results_db.write_progress([(job, report)], helpers.at(5))) == {job.id}

    data = await _json(client, f"/api/jobs/{job.id}")
    assert data["outcome"]["progress"] == {**report, "at": helpers.at(5).isoformat()}
    assert data["outcome"]["result"] is None
    page = await _page(client, f"/jobs/{job.id}")
    assert '<progress value="0.4" max="1" class="job-progress">40%</progress>' in page
    assert "copied 4 of 10 tables &lt;script&gt;" in page
    assert "<script" not in page and "<img" not in page

    done = store.run(
        conn, jobs_db.complete_jobs([job], helpers.at(9), {job.id: {"html": XSS, "rows": 10}})
    )
    assert done == {job.id}
    data = await _json(client, f"/api/jobs/{job.id}")
    assert data["outcome"]["result"] == {"html": XSS, "rows": 10}  # JSON: the data as it is
    assert data["outcome"]["progress"]["fraction"] == 0.4, "kept after the job ended"
    page = await _page(client, f"/jobs/{job.id}")
    assert "&quot;rows&quot;: 10" in page and "&lt;script&gt;" in page
    assert "<script" not in page and "<img" not in page


async def test_a_result_not_kept_shows_why(
    client: TestClient, app: tickwork.App, conn: psycopg.Connection
) -> None:
    job = _running(app, conn, {"n": 2})
    error = f"not kept: result.{XSS}: nan is not a JSON number"
    store.run(conn, jobs_db.complete_jobs([job], helpers.at(9), result_errors={job.id: error}))
    data = await _json(client, f"/api/jobs/{job.id}")
    assert data["outcome"] == {"result": None, "result_error": error, "progress": None}
    page = await _page(client, f"/jobs/{job.id}")
    assert "nan is not a JSON number" in page and "None reported." in page
    assert "<script" not in page and "<img" not in page


async def test_a_job_without_results_says_so(
    client: TestClient, app: tickwork.App, conn: psycopg.Connection
) -> None:
    job_id = app.enqueue("k.results", {})
    data = await _json(client, f"/api/jobs/{job_id}")
    assert data["outcome"] == {"result": None, "result_error": None, "progress": None}
    page = await _page(client, f"/jobs/{job_id}")
    assert '<h2>Progress</h2><p class="muted">None reported.</p>' in page
