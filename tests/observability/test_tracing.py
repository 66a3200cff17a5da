"""OpenTelemetry tracing (tickwork.tracing) with the real SDK and an in-memory exporter: the
trace context stored at enqueue and at firing, one execution span per attempt, the child of
that context and linked to it, with its attributes, errors and the task's own spans under it;
and, in subprocesses, nothing stored without a tracer provider or without the package."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from opentelemetry.util._once import Once

import tickwork
from tests.support.helpers import at, job_row, running, settings, wait_status, wait_until
from tests.support.schedule_helpers import NS, every, fire
from tickwork.clock import SettableClock
from tickwork.schedules.options import JobTemplate
from tickwork.worker.runner import Worker

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The global tracer provider, an SDK one exporting to memory, for this test only."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    try:
        yield exporter
    finally:
        provider.shutdown()
        # What opentelemetry-test-utils' reset_trace_globals does: the API sets its global
        # provider once per process, and later tests must run without this one.
        trace._TRACER_PROVIDER_SET_ONCE = Once()
        trace._TRACER_PROVIDER = None


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def _context(span: Any) -> trace.SpanContext:
    """A span's context (a live span, a finished one, or a context already)."""
    context = span.get_span_context() if hasattr(span, "get_span_context") else span
    assert isinstance(context, trace.SpanContext)
    return context


def ids(span: Any) -> tuple[int, int]:
    context = _context(span)
    return context.trace_id, context.span_id


def traceparent(span: Any) -> str:
    """The W3C header of ``span``, as the propagator writes it."""
    context = _context(span)
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


async def test_an_attempt_runs_in_a_consumer_span_child_of_and_linked_to_the_enqueuer(
    database_url: str,
    app: tickwork.App,
    clock: SettableClock,
    aconn: psycopg.AsyncConnection[Any],
    conn: psycopg.Connection[Any],
    spans: InMemorySpanExporter,
) -> None:
    tracer = trace.get_tracer("tests")

    @app.task("t.traced", queue="mail")
    async def traced(job: tickwork.Job) -> None:
        with tracer.start_as_current_span("inside the task"):
            pass

    with tracer.start_as_current_span("request") as request:
        job_id = await app.enqueue_async("t.traced", {"to": "ada"})
    assert job_row(conn, job_id)["trace_context"] == {"traceparent": traceparent(request)}

    async with running(Worker(app, settings(database_url, queues=("mail",)), clock=clock)):
        await wait_status(aconn, job_id, "succeeded")

    (run,) = named(spans, "tickwork.run t.traced")
    assert run.kind is SpanKind.CONSUMER
    assert run.parent is not None and ids(run.parent) == ids(request)
    assert [ids(link.context) for link in run.links] == [ids(request)]
    assert dict(run.attributes or {}) == {
        "messaging.system": "tickwork",
        "messaging.operation.type": "process",
        "messaging.destination.name": "mail",
        "messaging.message.id": str(job_id),
        "tickwork.job.id": job_id,
        "tickwork.job.kind": "t.traced",
        "tickwork.job.queue": "mail",
        "tickwork.job.attempt": 1,
        "tickwork.worker": "w1",
    }
    assert run.status.status_code is StatusCode.UNSET
    (inside,) = named(spans, "inside the task")
    assert inside.parent is not None and ids(inside.parent) == ids(run.context)


async def test_a_sync_task_enqueues_in_its_own_span_and_the_next_job_follows_it(
    database_url: str,
    app: tickwork.App,
    clock: SettableClock,
    aconn: psycopg.AsyncConnection[Any],
    conn: psycopg.Connection[Any],
    spans: InMemorySpanExporter,
) -> None:
    @app.task("t.first")
    def first(job: tickwork.Job) -> int:  # runs in the worker's thread pool
        return app.enqueue("t.second", {})

    @app.task("t.second")
    async def second(job: tickwork.Job) -> None:
        return None

    first_id = app.enqueue("t.first", {})  # outside any span: nothing stored, a trace of its own
    assert job_row(conn, first_id)["trace_context"] is None
    async with running(Worker(app, settings(database_url), clock=clock)):
        await wait_status(aconn, first_id, "succeeded")
        (second_id,) = (
            r[0] for r in conn.execute("SELECT id FROM tickwork.jobs WHERE kind = 't.second'")
        )
        await wait_status(aconn, second_id, "succeeded")

    (one,) = named(spans, "tickwork.run t.first")
    (two,) = named(spans, "tickwork.run t.second")
    assert one.parent is None and not one.links  # a root: created outside any trace
    assert job_row(conn, second_id)["trace_context"] == {"traceparent": traceparent(one.context)}
    assert two.parent is not None and ids(two.parent) == ids(one.context)
    assert [ids(link.context) for link in two.links] == [ids(one.context)]


async def test_each_failed_attempt_is_a_span_with_error_status_and_the_exception(
    database_url: str,
    app: tickwork.App,
    clock: SettableClock,
    aconn: psycopg.AsyncConnection[Any],
    spans: InMemorySpanExporter,
) -> None:
    @app.task("t.broken", max_attempts=2)
    async def broken(job: tickwork.Job) -> None:
        raise ValueError("no good")

    with trace.get_tracer("tests").start_as_current_span("request") as request:
        job_id = await app.enqueue_async("t.broken", {})
    async with running(Worker(app, settings(database_url), clock=clock)):
        await wait_status(aconn, job_id, "available", attempt=1)
        clock.set(at(60))  # past the retry delay
        await wait_status(aconn, job_id, "dead")

    attempts = named(spans, "tickwork.run t.broken")
    assert [(s.attributes or {})["tickwork.job.attempt"] for s in attempts] == [1, 2]
    for span in attempts:  # siblings in the enqueuer's trace, one per attempt
        assert span.parent is not None and ids(span.parent) == ids(request)
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description == "ValueError: no good"
        assert (span.attributes or {})["error.type"] == "builtins.ValueError"
        (event,) = span.events
        assert event.name == "exception"
        assert event.attributes is not None
        assert (event.attributes["exception.type"], event.attributes["exception.message"]) == (
            "ValueError",
            "no good",
        )
        assert "in broken" in str(event.attributes["exception.stacktrace"])
    assert len({ids(s.context) for s in attempts}) == 2


async def test_a_timed_out_attempt_has_error_status_and_error_type_timeout(
    database_url: str,
    app: tickwork.App,
    clock: SettableClock,
    aconn: psycopg.AsyncConnection[Any],
    spans: InMemorySpanExporter,
) -> None:
    @app.task("t.slow", max_attempts=1, timeout=0.05)
    async def slow(job: tickwork.Job) -> None:
        await asyncio.sleep(5)

    job_id = await app.enqueue_async("t.slow", {})
    async with running(Worker(app, settings(database_url), clock=clock)):
        await wait_status(aconn, job_id, "dead")

    (span,) = named(spans, "tickwork.run t.slow")
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "timed out after 0.05s"
    assert (span.attributes or {})["error.type"] == "timeout"


async def test_an_interrupted_attempt_ends_its_span_with_error_status(
    database_url: str,
    app: tickwork.App,
    clock: SettableClock,
    aconn: psycopg.AsyncConnection[Any],
    spans: InMemorySpanExporter,
) -> None:
    @app.task("t.stoppable")
    async def stoppable(job: tickwork.Job) -> None:
        await asyncio.sleep(30)

    job_id = await app.enqueue_async("t.stoppable", {})
    worker = Worker(app, settings(database_url), clock=clock)
    async with running(worker):
        await wait_until(lambda: worker.running_jobs == 1, what="the task to start")
        await asyncio.to_thread(app.cancel, job_id)  # the worker hears of it and stops the task
        await wait_status(aconn, job_id, "cancelled")

    (span,) = named(spans, "tickwork.run t.stoppable")
    assert span.status.status_code is StatusCode.ERROR
    # Asked to stop: the CancelledError carries tickwork.tasks.CANCEL_REQUESTED.
    assert span.status.description == "CancelledError: tickwork: the job was asked to stop"
    assert span.events == ()  # an interruption, not the task's exception


async def test_a_fired_job_runs_as_the_child_of_its_firing_span(
    database_url: str,
    app: tickwork.App,
    clock: SettableClock,
    aconn: psycopg.AsyncConnection[Any],
    conn: psycopg.Connection[Any],
    spans: InMemorySpanExporter,
) -> None:
    @app.task("s.traced")
    async def job(job: tickwork.Job) -> None:
        return None

    app.sync_schedules(NS, [every("tick", 60, job=JobTemplate(kind="s.traced"))])
    await fire(aconn, at(59))  # nothing due: no span
    assert named(spans, "tickwork.fire") == []
    report = await fire(aconn, at(60))
    assert report.fired == 1

    (firing,) = named(spans, "tickwork.fire")
    assert firing.kind is SpanKind.PRODUCER and firing.parent is None
    assert dict(firing.attributes or {}) == {
        "messaging.system": "tickwork",
        "messaging.operation.type": "create",
        "tickwork.namespaces": (NS,),
        "tickwork.fire.claimed": 1,
        "tickwork.fire.created": 1,
        "tickwork.fire.skipped": 0,
        "tickwork.fire.failed": 0,
    }
    (row,) = conn.execute("SELECT id, trace_context FROM tickwork.jobs").fetchall()
    job_id, stored = row
    assert stored == {"traceparent": traceparent(firing.context)}

    clock.set(at(60))
    async with running(Worker(app, settings(database_url), clock=clock)):
        await wait_status(aconn, job_id, "succeeded")
    (run,) = named(spans, "tickwork.run s.traced")
    assert run.parent is not None and ids(run.parent) == ids(firing.context)
    assert [ids(link.context) for link in run.links] == [ids(firing.context)]
    attributes = run.attributes or {}
    assert (
        attributes["tickwork.schedule.namespace"],
        attributes["tickwork.schedule.name"],
        attributes["tickwork.schedule.occurrence"],
    ) == (NS, "tick", at(60).isoformat())


async def test_a_trigger_carries_the_callers_context(
    app: tickwork.App, conn: psycopg.Connection[Any], spans: InMemorySpanExporter
) -> None:
    app.sync_schedules(NS, [every("tick", 60)])
    with trace.get_tracer("tests").start_as_current_span("kubectl annotate") as caller:
        job_id = app.trigger(NS, "tick", actor="tests")
    assert job_row(conn, job_id)["trace_context"] == {"traceparent": traceparent(caller)}


# --- no tracer provider, no package: subprocesses, as a deployment would run -------------

RUN_ONE_JOB = """
import asyncio, json, sys
import tickwork
from tickwork import tracing
from tickwork.settings import WorkerSettings
from tickwork.worker.runner import Worker

URL = sys.argv[1]
app = tickwork.App(URL)

@app.task("p.job")
async def job(job):
    return None

async def main():
    if tracing.AVAILABLE:  # the API without an SDK: its spans are not recording, not valid
        from opentelemetry import trace
        with trace.get_tracer("p").start_as_current_span("no provider"):
            job_id = await app.enqueue_async("p.job", {})
    else:
        job_id = await app.enqueue_async("p.job", {})
    settings = WorkerSettings(database_url=URL, app="p", name="p1", poll_seconds=0.05)
    worker = Worker(app, settings)
    run = asyncio.create_task(worker.run())
    for _ in range(400):
        status = (await asyncio.to_thread(app.get_job, job_id)).status
        if status == "succeeded":
            break
        await asyncio.sleep(0.025)
    worker.stop()
    await run
    await app.close_async()
    print(json.dumps({
        "job": job_id,
        "status": status,
        "available": tracing.AVAILABLE,
        "imported": sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry"),
    }))

asyncio.run(main())
"""

BLOCK_OPENTELEMETRY = """
import sys

class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "opentelemetry":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Blocker())
"""


def _run(database_url: str, script: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, "-c", script, database_url],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_without_the_package_jobs_run_and_no_trace_context_is_stored(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    result = _run(database_url, BLOCK_OPENTELEMETRY + RUN_ONE_JOB)
    assert (result["status"], result["available"], result["imported"]) == ("succeeded", False, [])
    assert job_row(conn, result["job"])["trace_context"] is None


def test_with_the_api_but_no_tracer_provider_no_trace_context_is_stored(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    result = _run(database_url, RUN_ONE_JOB)
    assert (result["status"], result["available"]) == ("succeeded", True)
    assert job_row(conn, result["job"])["trace_context"] is None
