"""History limits through the real operator (kmock) and a real database: a Schedule's
``successfulJobsHistoryLimit`` and ``failedJobsHistoryLimit`` reach the stored definition, the
retention duty keeps that many of its jobs, ``status.lastJob`` keeps the last job's id and
outcome once its row is gone, a lower limit trims at the next pass, and a limit past its
range is refused naming the field (kmock validates no schema: the operator's own check)."""

from __future__ import annotations

from typing import Any

import psycopg

import tickwork
from tests.operator.harness import DEADLINE, Cluster, OperatorFactory, row
from tests.support.helpers import running, settings, wait_until
from tickwork.maintenance.retention import Retention, RetentionConfig
from tickwork.worker.runner import Worker

KIND = "h.job"


def job_statuses(url: str) -> list[tuple[int, str]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT id, status::text FROM tickwork.jobs ORDER BY id")
        return [(r[0], r[1]) for r in rows]


def last_job(cluster: Cluster, name: str) -> dict[str, Any]:
    return dict((cluster.get(name) or {}).get("status", {}).get("lastJob") or {})


async def retain(url: str) -> int:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        return await Retention(RetentionConfig()).run_once(conn, None)


async def test_a_schedules_history_limits_are_kept_and_lastjob_survives(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    await start_operator()
    spec = {
        "every": "1h",
        "successfulJobsHistoryLimit": 1,
        "failedJobsHistoryLimit": 0,
        "job": {"kind": KIND, "maxAttempts": 1},
    }
    await cluster.create("limited", spec)
    await cluster.wait_ready("limited", "Synced")
    stored = row(database_url, "limited")
    assert stored is not None
    assert (
        stored["spec"]["successfulJobsHistoryLimit"],
        stored["spec"]["failedJobsHistoryLimit"],
    ) == (1, 0)

    app = tickwork.App(database_url)
    outcomes = iter([None, None, RuntimeError("third time unlucky")])

    @app.task(KIND)
    def job(job: tickwork.Job) -> None:
        failure = next(outcomes)
        if failure is not None:
            raise failure

    async with running(Worker(app, settings(database_url, namespaces=()))):
        for _ in range(3):
            app.trigger("ns", "limited", actor="test")
            await wait_until(
                lambda: all(s in ("succeeded", "dead") for _, s in job_statuses(database_url)),
                timeout=DEADLINE,
                what="the job to end",
            )
    [(first, _), (second, _), (third, _)] = job_statuses(database_url)
    await wait_until(
        lambda: last_job(cluster, "limited").get("outcome") == "dead", what="lastJob dead"
    )

    # One succeeded job kept (the newest), no failed one: the last job itself goes.
    assert await retain(database_url) == 2
    assert job_statuses(database_url) == [(second, "succeeded")]
    await wait_until(
        lambda: "finishedAt" not in last_job(cluster, "limited"), what="lastJob without times"
    )
    assert last_job(cluster, "limited") == {"id": third, "outcome": "dead"}
    assert first < second < third

    # A lower limit, applied by the operator's sync, trims at the next pass.
    await cluster.patch("limited", {"spec": {"successfulJobsHistoryLimit": 0}})
    await wait_until(
        lambda: (
            (row(database_url, "limited") or {}).get("spec", {}).get("successfulJobsHistoryLimit")
            == 0
        ),
        what="the new limit stored",
    )
    assert await retain(database_url) == 1
    assert job_statuses(database_url) == []

    # Past the range: refused, naming the field; the stored definition stays.
    await cluster.patch("limited", {"spec": {"failedJobsHistoryLimit": 1001}})
    body = await cluster.wait_ready("limited", "InvalidSpec")
    [ready] = [c for c in body["status"]["conditions"] if c["type"] == "Ready"]
    assert ready["message"] == "spec.failedJobsHistoryLimit: must be <= 1000, not 1001"
    assert (row(database_url, "limited") or {})["spec"]["failedJobsHistoryLimit"] == 0
    app.close()
