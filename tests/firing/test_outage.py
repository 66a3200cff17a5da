"""A fleet that was down for a day comes back: with the defaults (no startingDeadlineSeconds,
misfirePolicy Latest) a per-minute Schedule fires ONE job, not one per missed minute, and
every other occurrence is counted as skipped, on the row and in the metric. CatchUp stays
bounded by catchUpLimit. Three ``tickwork worker`` processes race to fire; nothing is fired
twice and no occurrence goes unaccounted for (fired + skipped = every occurrence of the outage)."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

import tickwork
from tests.support.helpers import free_port, wait_until_sync
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.options import JobTemplate, MisfirePolicy

NS = "team"
TICKWORK = str(Path(sys.executable).with_name("tickwork"))
MINUTE = timedelta(minutes=1)


@pytest.fixture
def workers(database_url: str) -> Iterator[list[int]]:
    """Three ``tickwork worker`` processes offering ``NS``; yields the ports of their /metrics."""
    ports = [free_port() for _ in range(3)]
    processes = [
        subprocess.Popen(
            [
                TICKWORK,
                "worker",
                "--app",
                "tickwork.examples:app",
                "--namespaces",
                NS,
                *_http(port),
            ],
            env={**os.environ, "TICKWORK_DATABASE_URL": database_url},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for port in ports
    ]
    try:
        with psycopg.connect(database_url, autocommit=True) as conn:
            wait_until_sync(
                lambda: _scalar(conn, "SELECT count(*) FROM tickwork.workers") == len(ports),
                timeout=30,
                what="three workers to register",
            )
        yield ports
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _http(port: int) -> list[str]:
    return ["--name", f"w{port}", "--http-port", str(port), "--http-host", "127.0.0.1"]


def _scalar(conn: psycopg.Connection[Any], query: str, params: Any = None) -> Any:
    row = conn.execute(query, params).fetchone()
    return None if row is None else row[0]


def _skipped_metric(port: int, schedule: str) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "tickwork_schedule_skipped_occurrences"
        for sample in family.samples
        if sample.name.endswith("_total") and sample.labels.get("schedule") == schedule
    )


def _occurrences(conn: psycopg.Connection[Any], name: str) -> list[datetime]:
    rows = conn.execute(
        "SELECT occurrence_at FROM tickwork.jobs WHERE schedule_name = %s ORDER BY 1", (name,)
    )
    return [row[0] for row in rows]


def test_a_day_long_outage_fires_a_default_schedule_once(
    database_url: str, workers: list[int]
) -> None:
    app = tickwork.App(database_url)
    template = JobTemplate(kind="examples.hello")
    app.sync_schedules(
        NS,
        [
            ScheduleDefinition(name="minutely", schedule="* * * * *", job=template),
            ScheduleDefinition(
                name="catching-up",
                schedule="* * * * *",
                misfire_policy=MisfirePolicy.CATCH_UP,
                catch_up_limit=5,
                job=template,
            ),
        ],
    )
    app.close()
    with psycopg.connect(database_url, autocommit=True) as conn:
        # The fleet was down for a day: both schedules' next run is a day in the past.
        (outage_start,) = conn.execute(
            "UPDATE tickwork.schedules SET next_run_at = date_trunc('minute', now())"
            " - interval '1 day'"
            " RETURNING next_run_at"
        ).fetchall()[0]
        conn.execute("SELECT pg_notify('tickwork_schedules', %s)", (NS,))

        wait_until_sync(
            lambda: _scalar(conn, "SELECT bool_and(next_run_at > now()) FROM tickwork.schedules"),
            timeout=30,
            what="the workers to fire the outage",
        )

        for name, kept in (("minutely", 1), ("catching-up", 6)):
            occurrences = _occurrences(conn, name)
            skipped = _scalar(
                conn, "SELECT skipped_occurrences FROM tickwork.schedules WHERE name = %s", (name,)
            )
            first = occurrences[0]
            # The most recent occurrences fire (Latest: one; CatchUp: limit + the current one),
            # one job each; a minute passing during the test may add an on-time one.
            at_return = [o for o in occurrences if o <= first + (kept - 1) * MINUTE]
            assert at_return == [first + k * MINUTE for k in range(kept)], name
            assert len(set(occurrences)) == len(occurrences), name
            # Nothing unaccounted for: every minute of the outage fired or was counted.
            elapsed = (occurrences[-1] - outage_start) // MINUTE + 1
            assert len(occurrences) + skipped == elapsed, name
            assert skipped >= 24 * 60 - 5, name
            assert sum(_skipped_metric(port, name) for port in workers) == skipped, name
