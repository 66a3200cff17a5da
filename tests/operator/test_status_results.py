"""A Schedule's ``status.lastJob`` shows its last job's progress while it runs and its result
once it is done (cut to the CRD's 1024 characters), or why the result was not kept: the real
operator against kmock, a real PostgreSQL, jobs fired by the firing pass and run by a real
in-process ``Worker``. What the operator writes passes the CRD's own schema."""

from __future__ import annotations

import asyncio
import math
from datetime import timedelta
from typing import Any

import jsonschema

import tickwork
from tests.operator.harness import DEADLINE, Cluster, OperatorFactory, row
from tests.operator.test_status_truth import fire_at, job_ids, last_job
from tests.schedules.test_crd import openapi_schema, to_json_schema
from tests.support.helpers import running, settings, wait_until
from tickwork.clock import SettableClock
from tickwork.worker.runner import Worker

KIND = "s.results"


def _valid(shown: dict[str, Any]) -> None:
    schema = openapi_schema()["properties"]["status"]["properties"]["lastJob"]
    jsonschema.validate(shown, to_json_schema(schema))


async def test_last_job_shows_progress_then_the_result_cut_short(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    await start_operator()
    await cluster.create("copy", {"every": "1m", "job": {"kind": KIND}})
    await cluster.wait_ready("copy", "Synced")
    stored = row(database_url, "copy")
    assert stored is not None

    reported, go_on = asyncio.Event(), asyncio.Event()
    app = tickwork.App(database_url)
    returns: list[Any] = [{"rows": "r" * 5000}, {"score": math.nan}]

    @app.task(KIND)
    async def copy(job: tickwork.Job) -> Any:
        await job.progress(0.4, "copied 4 of 10 tables <b>")
        reported.set()
        await go_on.wait()
        return returns.pop(0)

    later = SettableClock(stored["next_run_at"] + timedelta(minutes=10))  # both runs are due
    worker = Worker(app, settings(database_url, name="w-status"), clock=later)
    worker.progress.interval = 0.05
    try:
        async with running(worker):
            assert await fire_at(database_url, stored["next_run_at"]) == 1
            (first,) = job_ids(database_url)
            await asyncio.wait_for(reported.wait(), DEADLINE)
            await wait_until(
                lambda: last_job(cluster, "copy").get("progress") == 0.4, what="the progress"
            )
            shown = last_job(cluster, "copy")
            assert shown["id"] == first and shown["outcome"] == "running"
            assert shown["progressMessage"] == "copied 4 of 10 tables <b>"
            assert shown["progressTime"].endswith("Z")
            assert "result" not in shown
            _valid(shown)

            go_on.set()
            await wait_until(
                lambda: last_job(cluster, "copy").get("outcome") == "succeeded", what="succeeded"
            )
            shown = last_job(cluster, "copy")
            assert len(shown["result"]) == 1024
            assert shown["result"].startswith('{"rows": "rrr') and shown["result"].endswith("r…")
            _valid(shown)

            # The next run returns what cannot be kept: its error replaces the result shown.
            reported.clear()
            assert await fire_at(database_url, stored["next_run_at"] + timedelta(minutes=1)) == 1
            second = job_ids(database_url)[-1]
            await worker.maintain_once()  # its claim floor: fired later than the margin
            await wait_until(
                lambda: (
                    last_job(cluster, "copy").get("outcome") == "succeeded"
                    and last_job(cluster, "copy")["id"] == second
                ),
                what="the second job succeeded",
            )
            shown = last_job(cluster, "copy")
            assert "result" not in shown
            assert shown["resultError"] == "not kept: result.score: nan is not a JSON number"
            _valid(shown)
    finally:
        await app.close_async()
