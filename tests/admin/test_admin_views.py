"""What each view shows, as JSON and as a page: the overview, schedules per namespace (with the
namespaces no live worker fires flagged), jobs with filters and keyset pages, orphan kinds, and
the detail pages with their history and audit records. User data stays inert in pages."""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest
from aiohttp.test_utils import TestClient

import tickwork
from tests.admin import admin_helpers
from tests.admin.admin_helpers import BILLING, K8S, OPERATOR, VIEWER, XSS
from tests.support import helpers
from tests.support.schedule_helpers import every
from tickwork.admin.settings import AdminSettings
from tickwork.clock import SettableClock
from tickwork.maintenance import firing
from tickwork.schedules.options import IntervalMode

PAGE_SIZE = 3


@pytest.fixture
def admin_settings() -> AdminSettings:
    return AdminSettings(port=0, page_size=PAGE_SIZE)


@pytest.fixture
def ids(app: tickwork.App, conn: psycopg.Connection, clock: SettableClock) -> dict[str, int]:
    return admin_helpers.populate(app, conn, clock.now())


async def get_json(client: TestClient, path: str, headers: dict[str, str] = VIEWER) -> Any:
    response = await client.get(path, headers=headers)
    assert response.status == 200, await response.text()
    return await response.json()


async def get_page(client: TestClient, path: str) -> str:
    await admin_helpers.log_in(client, "victor", admin_helpers.VIEWER_SECRET)
    response = await client.get(path)
    assert response.status == 200, await response.text()
    assert response.content_type == "text/html"
    return await response.text()


async def test_overview(client: TestClient, ids: dict[str, int]) -> None:
    data = await get_json(client, "/api/overview")
    assert data["now"] == helpers.T0.isoformat()
    workers = {w["name"]: w for w in data["workers"]}
    assert workers["w-live"]["alive"] and not workers["w-gone"]["alive"]
    assert workers["w-live"]["namespaces"] == [BILLING]
    assert workers["w-live"]["running"] == 1
    queues = {q["queue"]: q for q in data["queues"]}
    assert (queues["default"]["due"], queues["default"]["later"]) == (3, 1)
    assert queues["default"]["dead"] == 1
    assert queues["fast"]["running"] == 1
    totals = data["totals"]
    assert (totals["dead_jobs"], totals["failing_jobs"], totals["namespaces"]) == (1, 1, 2)
    orphans = {(o["kind"], o["queue"]): o["kind_served"] for o in data["orphans"]}
    assert orphans == {("k.orphan", "default"): False, ("k.run", "other"): True}


async def test_overview_page(client: TestClient, ids: dict[str, int]) -> None:
    page = await get_page(client, "/")
    for text in ("w-live", "w-gone", "k.orphan", "no live worker runs this kind", "fast"):
        assert text in page


async def test_a_worker_that_missed_two_heartbeats_shows_stale(
    client: TestClient, conn: psycopg.Connection, ids: dict[str, int]
) -> None:
    """Alive (within the worker TTL) but silent for more than two of its heartbeats: stopped,
    killed or cut off, its row and its jobs should not look alive."""
    silent = admin_helpers.register_worker(
        conn, "w-silent", now=helpers.at(-21), heartbeat_seconds=10, namespaces=[BILLING]
    )
    admin_helpers.register_worker(
        conn, "w-beating", now=helpers.at(-19), heartbeat_seconds=10, namespaces=[BILLING]
    )
    workers = {w["name"]: w for w in (await get_json(client, "/api/overview"))["workers"]}
    assert (workers["w-silent"]["alive"], workers["w-silent"]["stale"]) == (True, True)
    assert (workers["w-beating"]["alive"], workers["w-beating"]["stale"]) == (True, False)
    assert (workers["w-live"]["alive"], workers["w-live"]["stale"]) == (True, False)
    page = await get_page(client, "/")
    rows = {row[0]: row[1] for row in re.findall(r"<td>(w-[a-z]+)</td><td><span[^>]*>(\w+)<", page)}
    assert rows == {
        "w-beating": "alive",
        "w-gone": "gone",
        "w-live": "alive",
        "w-silent": "stale",
    }
    live_job = await get_page(client, f"/jobs/{ids['running']}")
    assert "worker last heartbeat" in live_job and ">stale<" not in live_job
    conn.execute(
        "UPDATE tickwork.jobs SET picked_by = 'w-silent', picked_by_incarnation = %s WHERE id = %s",
        (silent, ids["running"]),
    )
    silent_job = await get_page(client, f"/jobs/{ids['running']}")
    assert re.search(
        r"worker last heartbeat.*?<time[^>]*>[^<]*</time> <span[^>]*>stale<", silent_job
    )


async def test_schedules_flag_namespaces_no_live_worker_fires(
    client: TestClient, ids: dict[str, int]
) -> None:
    data = await get_json(client, "/api/schedules")
    spaces = {n["namespace"]: n for n in data["namespaces"]}
    assert spaces[BILLING]["served"] and spaces[BILLING]["owner"] == "tickwork"
    assert not spaces[K8S]["served"] and spaces[K8S]["owner"] == "operator:prod"
    names = [(s["namespace"], s["name"]) for s in data["schedules"]]
    assert names == [(BILLING, "nightly"), (BILLING, "tick"), (K8S, "sweep")]
    nightly = data["schedules"][0]
    assert (nightly["schedule"], nightly["kind"], nightly["revision"]) == ("0 3 * * *", "s.job", 1)
    assert nightly["next_run_at"] == helpers.at(3 * 3600).isoformat()
    page = await get_page(client, f"/schedules?namespace={K8S}")
    assert "no live worker offers it" in page
    assert "sweep" in page and "nightly" not in page


async def test_schedules_pages_follow_the_key(
    client: TestClient, app: tickwork.App, ids: dict[str, int]
) -> None:
    app.sync_schedules("many", [every(f"s{i:02}", 60) for i in range(7)])
    seen: list[str] = []
    path = "/api/schedules?namespace=many"
    while True:
        data = await get_json(client, path)
        assert len(data["schedules"]) <= PAGE_SIZE
        seen += [s["name"] for s in data["schedules"]]
        if data["next_after"] is None:
            break
        namespace, name = data["next_after"]
        path = f"/api/schedules?namespace=many&after_namespace={namespace}&after_name={name}"
    assert seen == [f"s{i:02}" for i in range(7)]


async def test_schedule_detail_shows_history_audit_and_who_owns_it(
    client: TestClient, app: tickwork.App, ids: dict[str, int]
) -> None:
    job_id = app.trigger(BILLING, "tick", actor="cli-user", reason="by hand")
    data = await get_json(client, f"/api/schedules/{BILLING}/tick")
    assert data["summary"]["last_job_id"] == job_id
    assert data["namespace"]["served"]
    assert [j["id"] for j in data["jobs"]] == [job_id]
    assert [(a["actor"], a["action"]) for a in data["audit"]] == [("cli-user", "trigger")]
    assert data["row"]["spec"]["every"] == "1m"
    page = await get_page(client, f"/schedules/{BILLING}/tick")
    assert "change its manifest and sync again" in page
    operated = await get_page(client, f"/schedules/{K8S}/sweep")
    assert "kubectl edit schedule sweep -n team-a" in operated
    assert "no live worker offers this namespace" in operated


async def test_a_schedule_set_aside_by_a_firing_error_shows_it_in_listing_and_detail(
    client: TestClient, app: tickwork.App, conn: psycopg.Connection, ids: dict[str, int]
) -> None:
    conn.execute(
        "UPDATE tickwork.schedules SET spec = jsonb_set(spec, '{every}', '5'),"
        " revision = revision + 1 WHERE namespace = %s AND name = 'tick'",
        (BILLING,),
    )
    async with await psycopg.AsyncConnection.connect(conn.info.dsn, autocommit=True) as aconn:
        report = await firing.run_once(aconn, [BILLING], helpers.at(60))
    assert (report.fired, report.failed) == (0, 1)
    error = (
        "spec.every: must be a string, not a number (5) (the stored spec cannot be read by "
        "this version)"
    )
    data = await get_json(client, f"/api/schedules?namespace={BILLING}")
    assert data["namespaces"][0]["failing"] == 1
    tick = next(s for s in data["schedules"] if s["name"] == "tick")
    assert (tick["firing_error"], tick["firing_failures"]) == (error, 1)
    assert tick["firing_retry_at"] == helpers.at(61).isoformat()
    nightly = next(s for s in data["schedules"] if s["name"] == "nightly")
    assert (nightly["firing_error"], nightly["firing_failures"]) == (None, 0)
    detail = await get_json(client, f"/api/schedules/{BILLING}/tick")
    assert detail["summary"]["firing_error"] == detail["row"]["firing_error"] == error
    listing = await get_page(client, f"/schedules?namespace={BILLING}")
    assert ">failing</span>" in listing and "spec.every: must be a string" in listing
    page = await get_page(client, f"/schedules/{BILLING}/tick")
    assert "1 failed firings in a row; retry" in page and "spec.every: must be a string" in page
    assert "The stored spec cannot be read (invalid duration &#x27;5&#x27;" in page
    assert "none: its last firing worked" in await get_page(client, f"/schedules/{BILLING}/nightly")


async def test_jobs_filters(client: TestClient, ids: dict[str, int]) -> None:
    async def listed(query: str) -> set[int]:
        data = await get_json(client, f"/api/jobs?{query}")
        return {j["id"] for j in data["jobs"]}

    assert await listed("status=dead") == {ids["dead"]}
    assert await listed("status=failing") == {ids["failing"]}
    assert await listed("kind=k.orphan") == {ids["orphan"]}
    assert await listed("queue=other") == {ids["elsewhere"]}
    assert await listed("status=running") == {ids["running"]}
    assert await listed("namespace=billing&schedule=tick") == set()


async def test_running_jobs_show_their_picker_and_its_heartbeat(
    client: TestClient, ids: dict[str, int]
) -> None:
    (job,) = (await get_json(client, "/api/jobs?status=running"))["jobs"]
    assert job["picked_by"] == "w-live"
    assert job["picker_seen_at"] == helpers.T0.isoformat()


async def test_jobs_pages_follow_the_id(client: TestClient, ids: dict[str, int]) -> None:
    seen: list[int] = []
    path = "/api/jobs"
    while True:
        data = await get_json(client, path)
        assert len(data["jobs"]) <= PAGE_SIZE
        seen += [j["id"] for j in data["jobs"]]
        if data["next_before"] is None:
            break
        path = f"/api/jobs?before={data['next_before']}"
    assert seen == sorted(ids.values(), reverse=True)
    page = await get_page(client, "/jobs?status=available")
    assert 'rel="next"' in page and "status=available" in page


@pytest.mark.parametrize(
    "query", ["status=lost", "before=-1", "before=x", "after_namespace=a", "kind=" + "k" * 300]
)
async def test_malformed_filters_are_400(client: TestClient, query: str) -> None:
    path = "/api/schedules" if query.startswith("after") else "/api/jobs"
    response = await client.get(f"{path}?{query}", headers=VIEWER)
    assert response.status == 400
    assert "error" in await response.json()


async def test_job_detail(client: TestClient, ids: dict[str, int]) -> None:
    data = await get_json(client, f"/api/jobs/{ids['dead']}")
    assert data["job"]["status"] == "dead"
    assert data["job"]["last_error"] == "boom"
    assert data["job"]["payload"] == {"n": 5}
    assert data["audit"] == []


@pytest.mark.parametrize("path", ["/api/jobs/999999", "/api/schedules/billing/nope"])
async def test_unknown_targets_are_404(client: TestClient, ids: dict[str, int], path: str) -> None:
    response = await client.get(path, headers=VIEWER)
    assert response.status == 404
    html = await get_page_status(client, path.removeprefix("/api"))
    assert html == 404


async def get_page_status(client: TestClient, path: str) -> int:
    await admin_helpers.log_in(client, "victor", admin_helpers.VIEWER_SECRET)
    return (await client.get(path)).status


async def test_user_data_is_inert_in_pages(
    client: TestClient, app: tickwork.App, conn: psycopg.Connection
) -> None:
    job_id = app.enqueue(XSS, {"html": XSS}, queue="q<b>")
    admin_helpers.make_dead(conn, job_id, error=XSS)
    app.retry(job_id, actor=XSS, reason=XSS)
    pages = [
        await get_page(client, f"/jobs/{job_id}"),
        await get_page(client, "/jobs"),
        await get_page(client, "/"),
        await get_page(client, "/audit"),
    ]
    for page in pages:
        assert "<script" not in page and "<img" not in page
        assert "&lt;script&gt;" in page
    detail = await get_json(client, f"/api/jobs/{job_id}")
    assert detail["job"]["payload"] == {"html": XSS}  # JSON carries the data as it is
    assert detail["audit"][0]["reason"] == XSS


async def test_no_secret_or_connection_string_is_shown(
    client: TestClient, app: tickwork.App, ids: dict[str, int]
) -> None:
    texts = [await get_page(client, p) for p in ("/", "/schedules", "/jobs", "/audit")]
    texts += [
        await (await client.get(p, headers=OPERATOR)).text()
        for p in ("/api/overview", "/api/schedules", "/api/jobs", "/api/whoami")
    ]
    for text in texts:
        assert admin_helpers.OPERATOR_SECRET not in text
        assert admin_helpers.VIEWER_SECRET not in text
        assert app.database_url not in text
        assert not re.search(r"dbname=|postgres(ql)?://", text)


async def test_lists_show_the_exception_and_the_job_page_the_whole_traceback(
    app: tickwork.App, client: TestClient, conn: psycopg.Connection
) -> None:
    job = app.enqueue("k.run", {})
    frames = "".join(f'  File "/srv/app/step{i}.py", line {i}, in step{i}\n' for i in range(20))
    trace = f"Traceback (most recent call last):\n{frames}KeyError: 'ledger <b>'\n"
    admin_helpers.make_dead(conn, job, error=trace)
    listing = re.sub(r"<[^>]*>", "", await get_page(client, "/jobs"))  # the text shown
    assert "KeyError: &#x27;ledger &lt;b&gt;&#x27;" in listing
    assert "Traceback" not in listing and "step19.py" not in listing
    (row,) = (await get_json(client, "/api/jobs"))["jobs"]
    assert row["last_error"].endswith("KeyError: 'ledger <b>'\n")  # the tail, cut to 300
    detail = await get_page(client, f"/jobs/{job}")
    shown = re.search(r'<pre class="error-text">(.*?)</pre>', detail, re.S)
    assert shown is not None and shown[1].startswith("Traceback (most recent call last):")
    assert "step0.py" in shown[1] and shown[1].strip().endswith(
        "KeyError: &#x27;ledger &lt;b&gt;&#x27;"
    )


async def test_schedule_page_shows_next_occurrences_and_a_strip_of_runs(
    app: tickwork.App, client: TestClient, conn: psycopg.Connection, ids: dict[str, int]
) -> None:
    admin_helpers.finish(app, conn, "succeeded", 2 * 86400, lag=1)  # billing/nightly's runs
    admin_helpers.finish(app, conn, "dead", 86400, lag=1)
    page = await get_page(client, f"/schedules/{BILLING}/nightly")
    upcoming = re.search(r'<ol class="upcoming">(.*?)</ol>', page)
    assert upcoming is not None
    times = re.findall(r'<time datetime="([^"]+)">', upcoming[1])
    assert times[:2] == ["2030-01-01T03:00:00+00:00", "2030-01-02T03:00:00+00:00"]
    assert len(times) == 10
    runs = re.findall(r'<a href="/jobs/(\d+)" title="([^"]+)" class="run status-(\w+)">', page)
    assert [(title.split(" · ")[1], status) for _, title, status in runs] == [
        ("2029-12-29 23:59:58Z", "succeeded"),  # oldest first, at their occurrences
        ("2029-12-30 23:59:58Z", "dead"),
    ]

    tick = await get_page(client, f"/schedules/{BILLING}/tick")
    assert "2030-01-01T00:01:00+00:00" in tick and "2030-01-01T00:10:00+00:00" in tick
    assert "No runs yet." in tick

    app.sync_schedules("delayed", [every("drain", 60, interval_mode=IntervalMode.FIXED_DELAY)])
    drain = await get_page(client, "/schedules/delayed/drain")
    assert "A fixed-delay interval counts from each run&#x27;s end: the next run is at" in drain
    assert '<ol class="upcoming">' not in drain
