"""The metric label rename (CHANGELOG.md: ``namespace`` became ``schedule_namespace``), checked
on a real worker's ``/metrics`` over HTTP: no tickwork series has a label the Kubernetes scrape
sets itself (``namespace``, ``pod``...), job metrics carry the schedule namespace of their job
(empty for a job enqueued outside any schedule), and every scraped series has exactly the labels
:mod:`metric_catalog` reads from ``tickwork.metrics`` — the catalog the alert rule and dashboard
tests check every expression, grouping, ``$labels`` and legend against."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import aiohttp
import psycopg
from prometheus_client.parser import text_string_to_metric_families

import tickwork
from tests.alerts import metric_catalog
from tests.support.helpers import at, running, settings, wait_until
from tests.support.schedule_helpers import every
from tickwork import metrics
from tickwork.clock import SettableClock
from tickwork.http import ProbeServer, database_readiness
from tickwork.maintenance import firing
from tickwork.schedules.options import JobTemplate
from tickwork.worker.runner import Worker

NS = "labels-ns"
KIND = "labels.ok"
RAN = (
    "tickwork_jobs_claimed_total",
    "tickwork_job_duration_seconds_count",
    "tickwork_job_queue_latency_seconds_count",
)


OBSERVABILITY = Path(__file__).resolve().parents[2] / "docs" / "observability.md"
_TABLE_ROW = re.compile(r"^\| `(tickwork_\w+)` \| ([^|]*?) ?\|", re.MULTILINE)
_INLINE = re.compile(r"`(tickwork_\w+)\{([\w,]*)\}`")


def test_the_docs_name_each_metrics_labels() -> None:
    """docs/observability.md names every metric, and its labels (a table row, or
    ``name{labels}`` in the text) are the ones the code defines."""
    labels = {s.family: s.labels - {"le"} for s in metric_catalog.exported().values()}
    labels.update({name: s.labels - {"le"} for name, s in metric_catalog.exported().items()})
    text = OBSERVABILITY.read_text()
    documented = {
        name: {part.split()[0] for part in cell.split(",") if part.strip()}
        for name, cell in _TABLE_ROW.findall(text)
    }
    documented |= {name: set(filter(None, cell.split(","))) for name, cell in _INLINE.findall(text)}
    assert {name: labels.get(name) for name in documented} == documented
    families = {s.family for s in metric_catalog.exported().values()}
    missing = {family for family in families if f"`{family}" not in text}
    assert missing == set(), "metrics docs/observability.md does not name"


def test_no_metric_defines_a_label_the_scrape_sets() -> None:
    clashes = {
        name: sorted(series.labels & metric_catalog.RESERVED_LABELS)
        for name, series in metric_catalog.exported().items()
        if series.labels & metric_catalog.RESERVED_LABELS
    }
    assert clashes == {}


async def _samples(port: int) -> list[tuple[str, dict[str, str], float]]:
    url = f"http://127.0.0.1:{port}/metrics"
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        text = await response.text()
    return [
        (sample.name, sample.labels, sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name.startswith("tickwork_") and not sample.name.endswith("_created")
    ]


async def test_a_real_scrape_has_schedule_namespace_and_the_catalog_labels(
    database_url: str,
    app: tickwork.App,
    clock: SettableClock,
    conn: psycopg.Connection[Any],
) -> None:
    @app.task(KIND)
    async def ok(job: tickwork.Job) -> None:
        return None

    app.sync_schedules(NS, [every("tick", 60, job=JobTemplate(kind=KIND))])
    worker = Worker(app, settings(database_url, namespaces=(NS,)), clock=clock)
    server = ProbeServer(
        0, host="127.0.0.1", liveness=worker.liveness, readiness=database_readiness(database_url)
    )
    await server.start()
    scheduled = {"schedule_namespace": NS, "queue": "default", "kind": KIND}
    enabled = {"schedule_namespace": NS, "state": "enabled"}
    unscheduled = {**scheduled, "schedule_namespace": metrics.NO_SCHEDULE}
    samples: list[tuple[str, dict[str, str], float]] = []

    def value(name: str, labels: dict[str, str]) -> float:
        return sum(v for n, got, v in samples if n == name and got == labels)

    async def both_ran() -> bool:
        conn.execute("SELECT pg_notify(%s, %s)", (firing.CHANNEL, NS))
        samples[:] = await _samples(server.port)
        done = "tickwork_jobs_completed_total"
        return all(
            value(done, {**labels, "outcome": "succeeded"}) >= 1
            for labels in (
                scheduled,
                unscheduled,
            )
        )

    try:
        async with running(worker):
            clock.set(at(60))
            await app.enqueue_async(KIND, {})
            await wait_until(both_ran, what="a scheduled and an enqueued job to succeed")

            async def gauged() -> bool:
                # The fleet gauges, by schedule namespace too: this round, or the worker's own
                # maintenance loop when it holds the duty for the interval (still running).
                await worker.maintain_once()
                samples[:] = await _samples(server.port)
                return value("tickwork_fleet_schedules", enabled) == 1

            await wait_until(gauged, what="the fleet gauges")
    finally:
        await server.stop()

    catalog = metric_catalog.exported()
    for name, labels, _ in samples:
        assert name in catalog, f"{name} scraped, unknown to the catalog"
        assert set(labels) == catalog[name].labels, (name, labels)
        assert not set(labels) & metric_catalog.RESERVED_LABELS, (name, labels)
    assert value("tickwork_jobs_enqueued_total", unscheduled) >= 1
    for name in RAN:
        assert value(name, scheduled) >= 1, name
        assert value(name, unscheduled) >= 1, name
    assert value("tickwork_schedule_firing_lag_seconds_count", {"schedule_namespace": NS}) >= 1
    assert value("tickwork_fleet_schedules", enabled) == 1
