"""The jobs page filtered by kind (and no status) within schedule namespaces (a scoped
reader's, or the one filtered on) walks each namespace through jobs_namespace_kind_idx
(``job_page_by_kind``, migration 0024). Its pages hold exactly what the page over the whole
table holds for the same filters, newest first, page after page; never a job of another
namespace or one enqueued outside any schedule; and ann (team-a only) gets her kind-filtered
page over the API."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from aiohttp.test_utils import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.admin.admin_helpers import TEAM_A
from tickwork.db import admin as admin_db
from tickwork.db import store
from tickwork.model import JobStatus

NAMESPACES = ["team-a", "team-b", "team-c", "team-d"]
KINDS = ["k.one", "k.two", "k.three"]

_INSERT = """
INSERT INTO tickwork.jobs (kind, queue, status, attempt, last_error, schedule_namespace,
                           schedule_name, started_at, finished_at)
SELECT k, q, s::tickwork.job_status, 1, CASE WHEN s = 'dead' THEN 'boom' END, ns, name,
       CASE WHEN s <> 'available' THEN now() END,
       CASE WHEN s IN ('succeeded', 'dead') THEN now() END
FROM unnest(%(kinds)s::text[], %(queues)s::text[], %(statuses)s::text[],
            %(namespaces)s::text[], %(names)s::text[]) AS u(k, q, s, ns, name)
"""

_JOB = st.tuples(
    st.sampled_from(KINDS),
    st.sampled_from(["default", "other"]),
    st.sampled_from(["available", "succeeded", "dead"]),
    st.sampled_from([*NAMESPACES, None]),  # None: enqueued outside any schedule
    st.sampled_from(["s1", "s2"]),
)


def _load(conn: psycopg.Connection[Any], jobs: list[tuple[str, str, str, str | None, str]]) -> None:
    conn.execute("DELETE FROM tickwork.jobs")
    conn.execute(
        _INSERT,
        {
            "kinds": [j[0] for j in jobs],
            "queues": [j[1] for j in jobs],
            "statuses": [j[2] for j in jobs],
            "namespaces": [j[3] for j in jobs],
            "names": [j[4] if j[3] is not None else None for j in jobs],
        },
    )


def _pages(
    conn: psycopg.Connection[Any], where: admin_db.JobFilter, scope: admin_db.Scope, size: int
) -> list[list[admin_db.JobSummary]]:
    """Every page of ``size`` (keyset, as the console pages) for ``where`` in ``scope``."""
    pages, before = [], None
    while True:
        rows = store.run(
            conn, admin_db.jobs(where, before=before, limit=size, error_chars=50, scope=scope)
        )
        pages.append(rows)
        if len(rows) < size:
            return pages
        before = rows[-1].id


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    jobs=st.lists(_JOB, max_size=60),
    scope=st.one_of(st.none(), st.sets(st.sampled_from(NAMESPACES))),
    kind=st.sampled_from(KINDS),
    namespace=st.sampled_from([*NAMESPACES, None]),
    status=st.sampled_from([None, JobStatus.DEAD, JobStatus.AVAILABLE]),
    queue=st.sampled_from([None, "other"]),
    size=st.integers(1, 7),
)
def test_by_kind_pages_hold_what_the_whole_table_holds(
    conn: psycopg.Connection[Any],
    jobs: list[tuple[str, str, str, str | None, str]],
    scope: set[str] | None,
    kind: str,
    namespace: str | None,
    status: JobStatus | None,
    queue: str | None,
    size: int,
) -> None:
    _load(conn, jobs)
    where = admin_db.JobFilter(kind=kind, namespace=namespace, status=status, queue=queue)
    pages = _pages(conn, where, scope, size)
    listed = [job for page in pages for job in page]
    rows = conn.execute(
        "SELECT id, schedule_namespace, kind, status::text, queue FROM tickwork.jobs"
        " ORDER BY id DESC"
    ).fetchall()
    expected = [
        job_id
        for job_id, ns, k, s, q in rows
        if k == kind
        and (scope is None or ns in scope)
        and (namespace is None or ns == namespace)
        and (status is None or s == status.value)
        and (queue is None or q == queue)
    ]
    assert [job.id for job in listed] == expected
    assert all(len(page) <= size for page in pages)
    if scope is not None:
        assert all(job.schedule_namespace in scope for job in listed)


def test_the_walk_per_namespace_serves_scoped_and_namespace_filters() -> None:
    """Which statement a jobs page runs: by kind when it knows its namespaces and has no
    status (with one, job_page's planner combines the kind's index with the status's)."""
    kind = admin_db.JobFilter(kind="k.one")
    assert admin_db.jobs(kind, before=None, limit=5, error_chars=5, scope={"a"}).query == (
        "job_page_by_kind"
    )
    in_namespace = admin_db.JobFilter(kind="k.one", namespace="a")
    assert admin_db.jobs(in_namespace, before=None, limit=5, error_chars=5, scope=None).query == (
        "job_page_by_kind"
    )
    outside = admin_db.jobs(in_namespace, before=None, limit=5, error_chars=5, scope={"b"})
    assert outside.query == "job_page_by_kind" and outside.params["namespaces"] == []
    dead = admin_db.JobFilter(kind="k.one", status=JobStatus.DEAD)
    failing = admin_db.JobFilter(kind="k.one", failing=True)
    for where, scope in (
        (kind, None),
        (admin_db.JobFilter(), {"a"}),
        (dead, {"a"}),
        (failing, {"a"}),
    ):
        op = admin_db.jobs(where, before=None, limit=5, error_chars=5, scope=scope)
        assert op.query == "job_page"


@pytest.mark.parametrize("path", ["/api/jobs?kind=k.one", "/api/jobs?kind=k.one&status=dead"])
async def test_a_tenant_filters_by_kind_and_sees_only_hers(
    client: TestClient, conn: psycopg.Connection[Any], path: str
) -> None:
    jobs = [
        ("k.one", "default", status, ns, "s1")
        for ns in ("team-a", "team-b", None)
        for status in ("dead", "succeeded")
    ] + [("k.two", "default", "dead", "team-a", "s1")]
    _load(conn, jobs)
    response = await client.get(path, headers=TEAM_A)
    assert response.status == 200, await response.text()
    listed = (await response.json())["jobs"]
    want = 1 if "status" in path else 2
    assert len(listed) == want
    assert {(j["schedule_namespace"], j["kind"]) for j in listed} == {("team-a", "k.one")}
