"""Deadlines and auto-suspend in a Schedule's status, end to end: the real operator against
kmock and a real PostgreSQL. An occurrence missing its deadline turns ``Late`` True with a
Warning ``DeadlineMissed`` Event naming the occurrence, once, and the next success clears it;
N consecutive dead occurrences turn ``SuspendedAfterFailures`` True with a Warning
``TooManyFailures`` Event naming the job, and a resume turns it False; a restart of the
operator posts neither again. A Schedule using neither field shows neither condition."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import psycopg

import tickwork
from tests.operator.harness import DEADLINE, Cluster, OperatorFactory
from tests.operator.test_status_truth import condition, events, wait_events
from tests.support.helpers import wait_until
from tickwork.maintenance import deadlines

KIND = "s.job"
OCCURRENCE = datetime.fromisoformat("2026-01-05T05:00:00+00:00")


def occurrence(url: str, name: str, hour: int, status: str | None) -> int:
    """A job of ``name``'s occurrence ``hour`` hours after OCCURRENCE, ended ``status``."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "INSERT INTO tickwork.jobs (kind, schedule_namespace, schedule_name, occurrence_at)"
            " VALUES (%s, 'ns', %s, %s) RETURNING id",
            (KIND, name, OCCURRENCE + timedelta(hours=hour)),
        ).fetchone()
        assert row is not None
        if status is not None:
            conn.execute(
                "UPDATE tickwork.jobs SET status = %s, finished_at = %s WHERE id = %s",
                (status, OCCURRENCE + timedelta(hours=hour, minutes=1), row[0]),
            )
        return int(row[0])


async def check_deadlines(url: str, now: datetime) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await deadlines.DeadlineCheck().run_once(conn, now)


async def wait_condition(cluster: Cluster, name: str, kind: str, status: str) -> dict[str, Any]:
    await wait_until(
        lambda: condition(cluster, name, kind).get("status") == status,
        timeout=DEADLINE,
        what=f"{name}: {kind} {status}",
    )
    return condition(cluster, name, kind)


def status_of(cluster: Cluster, name: str) -> dict[str, Any]:
    return dict((cluster.get(name) or {}).get("status") or {})


async def test_a_missed_deadline_sets_late_with_one_event_until_the_next_success(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    operator = await start_operator(event_window_seconds=0)
    spec = {
        "schedule": "0 5 * * *",
        "deadline": {"succeedWithinSeconds": 1800},
        "job": {"kind": KIND},
    }
    await cluster.create("nightly", spec)
    await cluster.wait_ready("nightly", "Synced")
    on_time = await wait_condition(cluster, "nightly", "Late", "False")
    assert on_time["reason"] == "OnTime"
    assert status_of(cluster, "nightly")["deadlinesMissed"] == 0

    job = occurrence(database_url, "nightly", 0, "dead")
    await check_deadlines(database_url, OCCURRENCE + timedelta(minutes=31))
    late = await wait_condition(cluster, "nightly", "Late", "True")
    assert late["reason"] == "DeadlineMissed"
    assert "2026-01-05T05:00:00Z" in late["message"] and f"(job {job})" in late["message"]
    assert "2026-01-05T05:30:00Z" in late["message"]
    (event,) = await wait_events(cluster, "nightly", "DeadlineMissed", 1)
    assert event["type"] == "Warning" and event["message"] == late["message"]
    assert status_of(cluster, "nightly")["deadlinesMissed"] == 1

    # A restart posts nothing again for the same late occurrence.
    await operator.stop()
    await start_operator(event_window_seconds=0, identity="operator-1")
    occurrence(database_url, "nightly", 24, "succeeded")  # the next success clears it
    cleared = await wait_condition(cluster, "nightly", "Late", "False")
    assert "1 missed since creation" in cleared["message"]
    assert len(events(cluster, "nightly", "DeadlineMissed")) == 1


async def test_consecutive_dead_occurrences_suspend_with_an_event_and_a_resume_clears_it(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    await start_operator(event_window_seconds=0)
    spec = {"schedule": "0 5 * * *", "suspendAfterFailures": 2, "job": {"kind": KIND}}
    await cluster.create("fragile", spec)
    await cluster.create("plain", {"schedule": "0 5 * * *", "job": {"kind": KIND}})
    await cluster.wait_ready("fragile", "Synced")
    counting = await wait_condition(cluster, "fragile", "SuspendedAfterFailures", "False")
    assert (counting["reason"], counting["message"]) == (
        "Counting",
        "0 consecutive occurrence(s) ended dead of 2 allowed",
    )

    first = occurrence(database_url, "fragile", 0, "dead")
    await wait_until(
        lambda: status_of(cluster, "fragile").get("consecutiveFailures") == 1,
        timeout=DEADLINE,
        what="one dead occurrence counted",
    )
    second = occurrence(database_url, "fragile", 24, "dead")
    suspended = await wait_condition(cluster, "fragile", "SuspendedAfterFailures", "True")
    assert suspended["reason"] == "TooManyFailures"
    assert f"job {second} was" in suspended["message"]
    assert f"since job {first}" in suspended["message"]
    assert "tickwork schedules resume ns fragile" in suspended["message"]
    (event,) = await wait_events(cluster, "fragile", "TooManyFailures", 1)
    assert event["type"] == "Warning" and event["message"] == suspended["message"]

    app = tickwork.App(database_url)
    try:
        assert app.resume_schedule("ns", "fragile", actor="test").changed
    finally:
        app.close()
    resumed = await wait_condition(cluster, "fragile", "SuspendedAfterFailures", "False")
    assert resumed["message"].startswith("0 consecutive")
    assert len(events(cluster, "fragile", "TooManyFailures")) == 1

    await cluster.wait_ready("plain", "Synced")  # it shows neither condition nor fact
    plain = status_of(cluster, "plain")
    kinds = {c["type"] for c in plain.get("conditions", [])}
    assert kinds.isdisjoint({"Late", "SuspendedAfterFailures"})
    assert "deadlinesMissed" not in plain and "consecutiveFailures" not in plain
