"""The operator's life cycle against kmock and PostgreSQL: create, update, suspend, delete,
invalid specs, restarts, deletions while stopped."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg

from tests.operator.harness import Cluster, OperatorFactory, row
from tests.support import schedule_helpers
from tests.support.helpers import wait_until
from tickwork.maintenance import firing

EVERY_MINUTE: dict[str, Any] = {"schedule": "*/1 * * * *", "job": {"kind": "s.job"}}


def job_count(url: str, name: str) -> int:
    with psycopg.connect(url) as conn:
        found = conn.execute(
            "SELECT count(*) FROM tickwork.jobs WHERE schedule_name = %s", (name,)
        ).fetchone()
    assert found is not None
    return int(found[0])


async def fire_due(url: str, name: str, later: timedelta = timedelta(0)) -> int:
    """One firing pass at the schedule's next run (plus ``later``); jobs created."""
    stored = row(url, name)
    assert stored is not None and stored["next_run_at"] is not None
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        report = await firing.run_once(conn, ["ns"], stored["next_run_at"] + later)
    return report.fired


async def test_create_syncs_reports_status_and_fires(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    await start_operator()
    await cluster.create("nightly", EVERY_MINUTE)
    await cluster.wait_ready("nightly", "Synced")
    stored = row(database_url, "nightly")
    assert stored is not None and stored["enabled"] and stored["revision"] == 1
    assert stored["spec"]["schedule"] == "*/1 * * * *"
    # The stored row's facts come from the operator's read of the rows, which may follow the
    # sync's Synced by a status round (on a busy machine it did).
    await wait_until(
        lambda: (cluster.get("nightly") or {}).get("status", {}).get("revision") == 1,
        what="status.revision 1",
    )
    body = cluster.get("nightly")
    assert body is not None
    status = body["status"]
    assert status["observedGeneration"] == 1
    assert status["nextRunAt"].endswith("Z")
    assert "tickwork.io/schedule" in body["metadata"]["finalizers"]
    with psycopg.connect(database_url) as conn:
        owner = conn.execute(
            "SELECT owner FROM tickwork.schedule_namespaces WHERE namespace = 'ns'"
        ).fetchone()
    assert owner == ("operator:default",)

    assert await fire_due(database_url, "nightly") == 1
    assert job_count(database_url, "nightly") == 1
    await wait_until(
        lambda: (cluster.get("nightly") or {}).get("status", {}).get("active"),
        what="status.active to list the job",
    )


async def test_update_bumps_the_revision(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    await start_operator()
    await cluster.create("nightly", EVERY_MINUTE)
    await cluster.wait_ready("nightly", "Synced")
    await cluster.patch("nightly", {"spec": {"schedule": "*/5 * * * *"}})
    await wait_until(
        lambda: (cluster.get("nightly") or {}).get("status", {}).get("revision") == 2,
        what="status.revision 2",
    )
    stored = row(database_url, "nightly")
    assert stored is not None and stored["revision"] == 2
    assert stored["spec"]["schedule"] == "*/5 * * * *"
    assert (cluster.get("nightly") or {})["status"]["observedGeneration"] == 2


async def test_suspend_stops_firing(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    await start_operator()
    await cluster.create("nightly", EVERY_MINUTE)
    await cluster.wait_ready("nightly", "Synced")
    await cluster.patch("nightly", {"spec": {"suspend": True}})
    await wait_until(
        lambda: (row(database_url, "nightly") or {}).get("suspended") is True,
        what="the schedule to be suspended",
    )
    stored = row(database_url, "nightly")
    assert stored is not None and stored["revision"] == 2
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await schedule_helpers.fire(conn, stored["next_run_at"] + timedelta(hours=1))
    assert job_count(database_url, "nightly") == 0


async def test_delete_disables_before_the_finalizer_goes(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    await start_operator()
    await cluster.create("nightly", EVERY_MINUTE)
    await cluster.wait_ready("nightly", "Synced")
    await cluster.delete("nightly")
    await wait_until(lambda: cluster.get("nightly") is None, what="the object to go")
    stored = row(database_url, "nightly")
    assert stored is not None and not stored["enabled"] and stored["next_run_at"] is None


async def test_an_invalid_spec_keeps_the_last_definition_and_others_sync(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    await start_operator()
    await cluster.create("nightly", EVERY_MINUTE)
    await cluster.wait_ready("nightly", "Synced")
    await cluster.patch("nightly", {"spec": {"schedule": "61 * * * *"}})
    await cluster.create("hourly", {"schedule": "0 * * * *", "job": {"kind": "s.job"}})
    broken_spec = {"schedule": "0 * * * *", "timeZone": "Mars/Olympus", "job": {"kind": "s.job"}}
    await cluster.create("broken", broken_spec)
    body = await cluster.wait_ready("nightly", "InvalidSpec")
    condition = cluster.ready("nightly")
    assert condition is not None and condition["status"] == "False"
    assert condition["message"].startswith("spec.schedule:")
    assert body["status"]["revision"] == 1  # the last valid definition is still the stored one
    await cluster.wait_ready("hourly", "Synced")
    await cluster.wait_ready("broken", "InvalidSpec")
    broken = cluster.ready("broken")
    assert broken is not None and broken["message"].startswith("spec.timeZone:")
    assert row(database_url, "broken") is None

    stored = row(database_url, "nightly")
    assert stored is not None and stored["enabled"] and stored["revision"] == 1
    assert stored["spec"]["schedule"] == "*/1 * * * *"
    await wait_until(
        lambda: any(
            event["reason"] == "InvalidSpec" and event["type"] == "Warning"
            for event in cluster.events("nightly")
        ),
        what="a Warning event InvalidSpec",
    )

    await cluster.patch("nightly", {"spec": {"schedule": "*/2 * * * *"}})
    await wait_until(
        lambda: (row(database_url, "nightly") or {}).get("revision") == 2,
        what="the fixed spec to sync",
    )
    await cluster.wait_ready("nightly", "Synced")
