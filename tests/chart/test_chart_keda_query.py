"""The KEDA query the chart renders, run against a real, migrated tickwork database (the query
calls tickwork.keda_due_work, which a migration creates; the chart renders only the pool's
arguments): it counts
the open jobs of the workers' queues due within the lead time and the enabled, unsuspended
schedules of the workers' namespaces due within it, and nothing else. A schedule due soon
with no job anywhere is enough to wake a worker from zero. Each worker pool's query counts its
own queues and namespaces only. A paused queue's waiting jobs and a paused namespace's schedules
do not count (migration 0020); a paused queue's running jobs still do."""

from __future__ import annotations

import psycopg
import pytest

from tests.chart import chart_render
from tests.chart.chart_render import Rendering


def query_of(rendering: Rendering) -> str:
    (trigger,) = rendering.one("ScaledObject")["spec"]["triggers"]
    return str(trigger["metadata"]["query"])


def count(conn: psycopg.Connection, query: str) -> int:
    row = conn.execute(query).fetchone()  # type: ignore[call-overload]
    assert row is not None
    return int(row[0])


def add_job(conn: psycopg.Connection, queue: str, status: str, run_at: str) -> None:
    conn.execute(
        "INSERT INTO tickwork.jobs (kind, queue, status, run_at, lease_expires_at)"
        " VALUES ('k', %s, %s, now() + %s::interval,"
        " CASE WHEN %s = 'running' THEN now() + interval '30 seconds' END)",
        (queue, status, run_at, status),
    )


def add_schedule(
    conn: psycopg.Connection,
    namespace: str,
    name: str,
    next_run: str | None,
    *,
    enabled: bool = True,
    suspended: bool = False,
) -> None:
    conn.execute(
        "INSERT INTO tickwork.schedule_namespaces (namespace, owner) VALUES (%s, 'test')"
        " ON CONFLICT DO NOTHING",
        (namespace,),
    )
    conn.execute(
        "INSERT INTO tickwork.schedules (namespace, name, enabled, suspended, spec, next_run_at)"
        " VALUES (%s, %s, %s, %s, '{}', now() + %s::interval)",
        (namespace, name, enabled, suspended, next_run),
    )


@pytest.fixture
def query(rendered: dict[str, Rendering]) -> str:
    # worker.queues: default, o'neil; worker.namespaces: billing, default; leadSeconds 90.
    return query_of(rendered["keda"])


def test_the_query_calls_the_migrated_function_with_the_pools_arguments(query: str) -> None:
    assert query == (
        "SELECT tickwork.keda_due_work(ARRAY['default','o''neil']::text[],"
        " ARRAY['billing','default']::text[], 90)"
    )


def test_an_empty_database_keeps_zero_workers(conn: psycopg.Connection, query: str) -> None:
    assert count(conn, query) == 0


def test_due_jobs_of_the_workers_queues_count(conn: psycopg.Connection, query: str) -> None:
    add_job(conn, "default", "available", "-1 minute")  # due
    add_job(conn, "o'neil", "running", "-1 hour")  # running: keep its worker
    add_job(conn, "default", "available", "60 seconds")  # due within the lead time
    add_job(conn, "default", "available", "1 hour")  # later
    add_job(conn, "other", "available", "-1 minute")  # a queue these workers do not serve
    add_job(conn, "default", "succeeded", "-1 minute")
    add_job(conn, "default", "dead", "-1 minute")
    add_job(conn, "default", "cancelled", "-1 minute")
    assert count(conn, query) == 3


def test_a_schedule_due_soon_wakes_a_worker(conn: psycopg.Connection, query: str) -> None:
    add_schedule(conn, "billing", "soon", "45 seconds")  # counts: no job exists yet
    add_schedule(conn, "default", "overdue", "-10 minutes")  # counts: nobody fired it
    add_schedule(conn, "billing", "later", "1 hour")
    add_schedule(conn, "billing", "suspended", "10 seconds", suspended=True)
    add_schedule(conn, "billing", "pruned", None, enabled=False)
    add_schedule(conn, "elsewhere", "other-fleet", "10 seconds")  # not these workers'
    assert count(conn, query) == 2


def test_paused_work_does_not_wake_workers(conn: psycopg.Connection, query: str) -> None:
    add_job(conn, "default", "available", "-1 minute")
    add_job(conn, "o'neil", "available", "-1 minute")
    add_job(conn, "o'neil", "running", "-1 hour")  # running: keep its worker, paused or not
    add_schedule(conn, "billing", "soon", "45 seconds")
    add_schedule(conn, "default", "soon", "45 seconds")
    assert count(conn, query) == 5
    conn.execute(
        "INSERT INTO tickwork.pauses (scope, name, paused_by, paused_at)"
        " VALUES ('queue', 'o''neil', 'test', now()), ('namespace', 'billing', 'test', now())"
    )
    assert count(conn, query) == 3


def test_without_queues_every_queue_counts(
    helm: chart_render.Helm, conn: psycopg.Connection
) -> None:
    values = {**chart_render.QUICK_START, "keda": {"enabled": True}}
    query = query_of(helm.render("keda-all-queues", values))
    add_job(conn, "anything", "available", "-1 minute")
    add_schedule(conn, "default", "soon", "30 seconds")
    assert count(conn, query) == 2


def test_a_pools_query_counts_only_that_pools_queues_and_namespaces(
    rendered: dict[str, Rendering], conn: psycopg.Connection
) -> None:
    # The billing pool: queues billing, invoices; namespace billing. Reports has no KEDA.
    query = query_of(rendered["pools"])
    add_job(conn, "billing", "available", "-1 minute")
    add_job(conn, "invoices", "running", "-1 hour")
    add_job(conn, "reports", "available", "-1 minute")  # the reports pool's
    add_job(conn, "default", "available", "-1 minute")  # nobody's pool here
    add_schedule(conn, "billing", "soon", "30 seconds")
    add_schedule(conn, "reports", "soon", "30 seconds")
    add_schedule(conn, "default", "soon", "30 seconds")
    assert count(conn, query) == 3
