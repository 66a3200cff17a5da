"""Metrics as Prometheus sees them: a running worker's ``/metrics`` scraped over HTTP while real
events happen (occurrences fired, skipped by misfire and by overlap, a retry, a timeout, a dead
job, a lease recovery), the fleet gauges its maintenance samples, and ``promtool check
metrics`` on the scraped text. Time is the pinned clock; the worker's firing loop is woken by
the notification a sync would send.

Metrics live in the process-wide registry, so every check is a difference from a scrape taken
before, and the names (namespaces, kinds, queues) are this module's own.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import psycopg
import pytest
from prometheus_client import REGISTRY, CollectorRegistry, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import tickwork
from tests.support import binaries
from tests.support.helpers import T0, at, claim, running, settings, wait_status, wait_until
from tests.support.schedule_helpers import every
from tickwork import metrics
from tickwork.clock import SettableClock
from tickwork.http import ProbeServer, database_readiness
from tickwork.maintenance import firing, gauges
from tickwork.schedules.options import ConcurrencyPolicy, JobTemplate, MisfirePolicy
from tickwork.worker.runner import Worker

NS = "metrics-ns"
IDLE_NS = "metrics-idle"
"""Has an enabled schedule and no worker offering it."""
HELD_QUEUE = "metrics-held"
"""A queue no worker serves: its jobs stay available."""


@dataclass(frozen=True)
class Scrape:
    text: str
    values: dict[tuple[str, frozenset[tuple[str, str]]], float]

    def __call__(self, name: str, **labels: str) -> float:
        """The sample's value; 0 when it is not exported."""
        return self.values.get((name, frozenset(labels.items())), 0.0)

    def has(self, name: str) -> bool:
        return any(key[0] == name for key in self.values)


def parse(text: str) -> Scrape:
    values = {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    return Scrape(text, values)


async def scrape(port: int) -> Scrape:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/metrics") as response,
    ):
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        return parse(await response.text())


async def until(
    port: int,
    condition: Callable[[Scrape], bool],
    what: str,
    nudge: Callable[[], object] | None = None,
) -> Scrape:
    """Scrape until ``condition`` holds (calling ``nudge`` before each try)."""
    latest: list[Scrape] = []

    async def check() -> bool:
        if nudge is not None:
            nudge()
        latest[:] = [await scrape(port)]
        return condition(latest[0])

    await wait_until(check, what=what)
    return latest[0]


@pytest.fixture
async def probes(database_url: str) -> AsyncIterator[Callable[[Worker], ProbeServer]]:
    """Start the HTTP port of a worker (on a free port), stopped after the test."""
    started: list[ProbeServer] = []

    def start(worker: Worker) -> ProbeServer:
        server = ProbeServer(
            0,
            host="127.0.0.1",
            liveness=worker.liveness,
            readiness=database_readiness(database_url),
        )
        started.append(server)
        return server

    yield start
    for server in started:
        await server.stop()


async def test_counters_and_fleet_gauges_move_for_real_events(
    database_url: str,
    app: tickwork.App,
    clock: SettableClock,
    conn: psycopg.Connection[Any],
    probes: Callable[[Worker], ProbeServer],
) -> None:
    @app.task("m.ok")
    async def ok(job: tickwork.Job) -> None:
        return None

    @app.task("m.flaky", max_attempts=2)
    async def flaky(job: tickwork.Job) -> None:
        raise RuntimeError("flaky")

    @app.task("m.slow", timeout=0.05)
    async def slow(job: tickwork.Job) -> None:
        await asyncio.sleep(5)  # cut short by the task's timeout

    @app.task("m.lost")
    async def lost(job: tickwork.Job) -> None:
        return None

    app.sync_schedules(
        NS,
        [
            every("fired", 60, job=JobTemplate(kind="m.ok")),
            every(
                "late",
                60,
                starting_deadline_seconds=10,
                misfire_policy=MisfirePolicy.SKIP,
                job=JobTemplate(kind="m.ok"),
            ),
            every(
                "busy",
                60,
                concurrency_policy=ConcurrencyPolicy.FORBID,
                job=JobTemplate(kind="m.hold", queue=HELD_QUEUE),
            ),
        ],
    )
    app.sync_schedules(IDLE_NS, [every("idle", 60, job=JobTemplate(kind="m.ok"))])
    worker = Worker(
        app,
        settings(
            database_url,
            namespaces=(NS,),
            maintenance_seconds=60,
            worker_ttl_seconds=3600,
        ),
        clock=clock,
    )
    server = probes(worker)
    await server.start()
    before = await scrape(server.port)

    def moved(after: Scrape, name: str, **labels: str) -> float:
        return after(name, **labels) - before(name, **labels)

    def wake_firing() -> None:
        conn.execute("SELECT pg_notify(%s, %s)", (firing.CHANNEL, NS))

    scheduled = {"schedule_namespace": NS, "queue": "default", "kind": "m.ok"}
    async with running(worker):
        # Every schedule's first occurrence is on time.
        clock.set(at(60))
        await until(
            server.port,
            lambda s: (
                moved(s, "tickwork_jobs_completed_total", **scheduled, outcome="succeeded") == 2
            ),
            "the first occurrences to run",
            wake_firing,
        )
        # 30 s later than the second: "fired" fires it; "late" misses its 10 s deadline;
        # "busy" still has its first job open (nobody serves its queue).
        clock.set(at(150))
        after = await until(
            server.port,
            lambda s: (
                moved(s, "tickwork_jobs_completed_total", **scheduled, outcome="succeeded") == 3
            ),
            "the second occurrence to run",
            wake_firing,
        )
        occurrences = "tickwork_schedule_occurrences_total"
        # Per namespace, queue and kind: a series per schedule would be a million of them.
        assert moved(after, occurrences, **scheduled) == 3  # fired twice, late once
        held = {"queue": HELD_QUEUE, "kind": "m.hold"}
        assert moved(after, occurrences, schedule_namespace=NS, **held) == 1
        skipped = "tickwork_schedule_skipped_occurrences_total"
        late = {"schedule": "late", **scheduled}
        busy = {"schedule_namespace": NS, "schedule": "busy", **held}
        assert moved(after, skipped, **late, reason="misfire") == 1
        assert moved(after, skipped, **late, reason="overlap") == 0
        assert moved(after, skipped, **busy, reason="overlap") == 1
        lag = "tickwork_schedule_firing_lag_seconds"
        assert moved(after, f"{lag}_count", schedule_namespace=NS) == 4
        assert moved(after, f"{lag}_sum", schedule_namespace=NS) == 30
        last_fire = after("tickwork_schedule_last_fire_timestamp_seconds", schedule_namespace=NS)
        assert last_fire == at(120).timestamp()
        assert moved(after, "tickwork_jobs_claimed_total", **scheduled) == 3
        assert moved(after, "tickwork_job_duration_seconds_count", **scheduled) == 3
        assert moved(after, "tickwork_job_queue_latency_seconds_count", **scheduled) == 3
        # Claimed at 60 (two on time) and at 150 (the one due at 120).
        assert moved(after, "tickwork_job_queue_latency_seconds_sum", **scheduled) == 30

        # A retry, then a death; a timeout.
        await app.enqueue_async("m.flaky", {"secret": "not-in-metrics"})
        await app.enqueue_async("m.slow", {})
        unscheduled = {"schedule_namespace": metrics.NO_SCHEDULE, "queue": "default"}
        flaky_labels = {**unscheduled, "kind": "m.flaky"}
        completed = "tickwork_jobs_completed_total"
        await until(
            server.port,
            lambda s: (
                moved(s, completed, **flaky_labels, outcome="retried") == 1
                and moved(s, completed, **unscheduled, kind="m.slow", outcome="timed_out") == 1
            ),
            "a retry and a timeout",
        )
        clock.set(at(200))  # past the retry delay (30 s)
        after = await until(
            server.port,
            lambda s: moved(s, completed, **flaky_labels, outcome="dead") == 1,
            "the flaky job to die",
        )
        assert moved(after, "tickwork_jobs_enqueued_total", **flaky_labels) == 1
        assert moved(after, "tickwork_jobs_claimed_total", **flaky_labels) == 2

        # A job claimed by a worker that then vanished: its lease runs out at 230.
        with conn.transaction():
            job_id = app.enqueue("m.lost", {}, conn=conn)
            (taken,) = claim(conn, kinds=["m.lost"], now=at(200), worker="ghost")
            assert taken.id == job_id
        clock.set(at(300))
        await worker.maintain_once()
        lost_labels = {**unscheduled, "kind": "m.lost"}
        after = await until(
            server.port,
            lambda s: moved(s, completed, **lost_labels, outcome="succeeded") == 1,
            "the recovered job to run",
        )
        assert moved(after, "tickwork_lease_recoveries_total", **lost_labels) == 1

        # The fleet gauges, sampled by the same maintenance pass at 300.
        assert after("tickwork_fleet_sample_timestamp_seconds") == at(300).timestamp()
        assert after("tickwork_fleet_workers") == 1
        assert after("tickwork_fleet_jobs", queue=HELD_QUEUE, status="available") == 1
        assert after("tickwork_fleet_jobs", queue=HELD_QUEUE, status="running") == 0
        assert after("tickwork_fleet_oldest_due_job_age_seconds", queue=HELD_QUEUE) == 240
        assert after("tickwork_fleet_jobs", queue="default", status="dead") == 1
        assert after("tickwork_fleet_dead_jobs", queue="default") == 1
        assert after("tickwork_fleet_dead_jobs", queue=HELD_QUEUE) == 0
        assert after("tickwork_fleet_schedules", schedule_namespace=NS, state="enabled") == 3
        assert after("tickwork_fleet_schedules", schedule_namespace=NS, state="disabled") == 0
        assert after("tickwork_fleet_schedules", schedule_namespace=IDLE_NS, state="enabled") == 1
        assert after("tickwork_fleet_namespace_workers", schedule_namespace=NS) == 1
        assert after("tickwork_fleet_namespace_workers", schedule_namespace=IDLE_NS) == 0
        overdue = "tickwork_fleet_overdue_schedules"
        assert after(overdue, schedule_namespace=IDLE_NS) == 1  # due at 60

    assert "not-in-metrics" not in after.text
    check = subprocess.run(
        [str(binaries.promtool()), "check", "metrics"],
        input=after.text,
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stdout + check.stderr


async def test_cancelling_a_running_job_counts_a_cancelled_attempt(
    database_url: str,
    app: tickwork.App,
    clock: SettableClock,
    aconn: psycopg.AsyncConnection[Any],
    probes: Callable[[Worker], ProbeServer],
) -> None:
    @app.task("m.cancel")
    async def hang(job: tickwork.Job) -> None:
        await asyncio.sleep(30)  # until cancelled

    worker = Worker(app, settings(database_url), clock=clock)
    server = probes(worker)
    await server.start()
    labels = {"schedule_namespace": "", "queue": "default", "kind": "m.cancel"}
    labels["outcome"] = "cancelled"
    before = await scrape(server.port)
    async with running(worker):
        job_id = await app.enqueue_async("m.cancel", {})
        await wait_status(aconn, job_id, "running")
        app.cancel(job_id, actor="test", reason="metrics")
        await wait_status(aconn, job_id, "cancelled")  # its worker stopped it and recorded it
        after = await scrape(server.port)
    assert (
        after("tickwork_jobs_completed_total", **labels)
        - before("tickwork_jobs_completed_total", **labels)
        == 1
    )


def test_a_stale_fleet_sample_is_no_longer_exported() -> None:
    sample = gauges.FleetSample(at=T0, workers=3, jobs=[], schedules=[])
    gauges.export(sample, fresh_for=3600)
    exported = parse(generate_latest(REGISTRY).decode())
    assert exported("tickwork_fleet_workers") == 3
    gauges.export(sample, fresh_for=0)
    assert not metrics.FLEET.fresh
    exported = parse(generate_latest(REGISTRY).decode())
    assert not any(name.startswith("tickwork_fleet_") for name, _ in exported.values)


def test_fast_histogram_matches_prometheus_client_histogram() -> None:
    registry = CollectorRegistry()
    fast = metrics.FastHistogram("t_fast_seconds", "t", ["q"], (0.5, 1, 5), registry=registry)
    reference = Histogram("t_ref_seconds", "t", ["q"], buckets=(0.5, 1, 5), registry=registry)
    for value in (0.1, 0.5, 0.7, 1.0, 3, 5, 9, 100):
        fast.labels("a").observe(value)
        reference.labels("a").observe(value)
    exported = parse(generate_latest(registry).decode())
    for suffix, labels in [
        *(("_bucket", {"q": "a", "le": le}) for le in ("0.5", "1.0", "5.0", "+Inf")),
        ("_count", {"q": "a"}),
        ("_sum", {"q": "a"}),
    ]:
        assert exported(f"t_fast_seconds{suffix}", **labels) == exported(
            f"t_ref_seconds{suffix}", **labels
        ), (suffix, labels)
    assert exported("t_fast_seconds_bucket", q="a", le="1.0") == 4  # le is inclusive
