"""The fleet gauges of flow rules: the due waiting jobs held per queue by the first reason
that holds them (a pause, a queue's, kind's or namespace's concurrency limit with no room, a
rate used up, for a keyed rate per value), and each rule's limits and their use."""

from __future__ import annotations

from typing import Any

import psycopg
from prometheus_client import REGISTRY

import tickwork
from tests.flow.test_limited_claims import claim_ruled
from tests.support.helpers import at
from tickwork.maintenance import gauges

KIND = "flow.job"
OTHER = "flow.other"


def value(metric: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(metric, labels)


def held(queue: str) -> dict[str, float | None]:
    return {
        reason: value("tickwork_fleet_jobs_held", reason=reason, queue=queue)
        for reason in ("paused", "queue_limit", "kind_limit", "namespace_limit", "rate_limit")
    }


async def export(aconn: psycopg.AsyncConnection[Any]) -> None:
    gauges.export(await gauges.sample(aconn, 60.0, at(0)), fresh_for=3600)


def enqueue(app: tickwork.App, count: int, queue: str, kind: str = KIND, **payload: Any) -> None:
    for _ in range(count):
        app.enqueue(kind, payload, queue=queue, run_at=at(-10))


async def test_held_jobs_by_reason_and_the_rules_use(
    app: tickwork.App, conn: psycopg.Connection[Any], aconn: psycopg.AsyncConnection[Any]
) -> None:
    enqueue(app, 5, "q")
    enqueue(app, 3, "k", OTHER)
    enqueue(app, 2, "free")
    await export(aconn)
    nothing = dict.fromkeys(held("q"), 0.0)
    assert held("q") == held("k") == held("free") == nothing

    app.set_limit("queue", "q", max_running=2)
    app.set_limit("kind", OTHER, max_running=1, rate="10/hour")
    assert len(claim_ruled(conn, kinds=[KIND, OTHER], queues=["q", "k"])) == 3
    await export(aconn)
    assert held("q") == {**nothing, "queue_limit": 3}
    assert held("k") == {**nothing, "kind_limit": 2}
    assert held("free") == nothing
    assert value("tickwork_fleet_limit_max_running", scope="queue", name="q") == 2
    assert value("tickwork_fleet_limit_running", scope="queue", name="q") == 2
    assert value("tickwork_fleet_limit_running", scope="kind", name=OTHER) == 1
    assert value("tickwork_fleet_limit_rate_starts", scope="kind", name=OTHER) == 10
    assert value("tickwork_fleet_limit_recent_starts", scope="kind", name=OTHER) == 1
    assert value("tickwork_fleet_limit_rate_starts", scope="queue", name="q") is None

    app.pause_queue("q")  # the first reason wins: each job is counted once
    app.set_limit("kind", OTHER, rate="1/hour")
    await export(aconn)
    assert held("q") == {**nothing, "paused": 3}
    assert held("k") == {**nothing, "rate_limit": 2}
    assert value("tickwork_fleet_limit_max_running", scope="kind", name=OTHER) is None

    app.remove_limit("kind", OTHER)
    app.resume_queue("q")
    app.remove_limit("queue", "q")
    await export(aconn)
    assert held("q") == held("k") == nothing
    assert value("tickwork_fleet_limit_max_running", scope="queue", name="q") is None


async def test_a_keyed_rate_holds_the_jobs_of_its_used_up_values(
    app: tickwork.App, conn: psycopg.Connection[Any], aconn: psycopg.AsyncConnection[Any]
) -> None:
    app.set_limit("queue", "q", rate="1/hour", rate_key="customer")
    enqueue(app, 3, "q", customer="acme")
    enqueue(app, 2, "q", customer="globex")
    assert len(claim_ruled(conn, kinds=[KIND], queues=["q"])) == 2  # one of each
    await export(aconn)
    assert held("q")["rate_limit"] == 2 + 1
    assert value("tickwork_fleet_limit_recent_starts", scope="queue", name="q") == 2


async def test_a_namespace_limit_holds_its_jobs_in_every_queue(
    app: tickwork.App, conn: psycopg.Connection[Any], aconn: psycopg.AsyncConnection[Any]
) -> None:
    conn.execute(
        "INSERT INTO tickwork.jobs (kind, queue, schedule_namespace, schedule_name, run_at,"
        " status, attempt, lease_expires_at) "
        "SELECT %s, q, 'tenant', 's', %s, CASE WHEN n = 1 AND q = 'a' THEN 'running'"
        " ELSE 'available' END::tickwork.job_status, 0, %s"
        " FROM generate_series(1, 3) AS n, unnest('{a,b}'::text[]) AS q",
        (KIND, at(-10), at(60)),
    )
    app.set_limit("namespace", "tenant", max_running=1)
    await export(aconn)
    assert held("a")["namespace_limit"] == 2
    assert held("b")["namespace_limit"] == 3
