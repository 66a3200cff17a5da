"""``tickwork dev``: everything on one machine with no set-up. An embedded PostgreSQL server keeps
its data in a directory of the project (``.tickwork`` by default), the migrations are applied,
the example Schedules (shipped in the package, ``tickwork/example_schedules/``) are synced into
namespace ``examples`` (but those with a ``jobTemplate``: they need Kubernetes), a worker
serves the example App (:mod:`tickwork.examples`) and fires
that namespace, a few example jobs are enqueued, and every fired occurrence, skipped occurrence
and job state change is printed as one line (``--db-only``: just the migrated server and its
URL, for trying the Python API or your own worker on it). The worker serves ``/metrics``,
``/healthz`` and ``/readyz`` on 127.0.0.1:9093 (a worker's default is 9090, the console's 9091),
or, when 9093 is taken, on the next free port that is no other role's default (9094, ...).
"""

from __future__ import annotations

import asyncio
import dataclasses
import signal
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import TextIO

from tickwork import examples, ports
from tickwork.app import App
from tickwork.clock import sleep
from tickwork.db import migrate
from tickwork.db.embedded import EmbeddedPostgres
from tickwork.model import Job, JobId, JobStatus
from tickwork.schedules import manifests
from tickwork.settings import WorkerSettings, default_worker_name
from tickwork.worker import executor
from tickwork.worker.runner import Worker

EXAMPLES_APP = "tickwork.examples:app"
SCHEDULES = resources.files("tickwork") / "example_schedules"
"""The example Schedule manifests; ``examples/schedules`` in the repository links here."""
NAMESPACE = "examples"
OWNER = "tickwork-dev"
POLL_SECONDS = 1.0
POLL_LIMIT = 200
DELAY_SECONDS = 10
UNIQUE_KEY = "examples-report"
HTTP_HOST = "127.0.0.1"
HTTP_PORT = 9093


@contextmanager
def database(data_dir: Path, port: int | None, out: TextIO) -> Iterator[EmbeddedPostgres]:
    """The embedded server in ``data_dir``, started and migrated; stopped on exit."""
    out.write(f"tickwork dev: starting PostgreSQL in {data_dir.absolute()}\n")
    out.flush()
    with EmbeddedPostgres(data_dir, port=port, durable=True) as server:
        applied = migrate.apply(server.conninfo)
        if applied:
            out.write(f"applied migrations: {', '.join(m.name for m in applied)}\n")
        yield server


def worker_settings(database_url: str) -> WorkerSettings:
    """Production defaults, with the waits shortened so that things happen in view; the
    worker fires the example schedules."""
    return WorkerSettings(
        database_url=database_url,
        app=EXAMPLES_APP,
        namespaces=(NAMESPACE,),
        name=default_worker_name(),
        concurrency=4,
        lease_seconds=10.0,
        heartbeat_seconds=2.0,
        poll_seconds=1.0,
        maintenance_seconds=1.0,
        shutdown_grace_seconds=10.0,
        http_host=HTTP_HOST,
        http_port=free_port(HTTP_PORT),
    )


def free_port(preferred: int) -> int:
    """``preferred`` when it is free on :data:`HTTP_HOST`, otherwise the first free one of
    its fallbacks (:func:`tickwork.ports.fallback_ports`: another dev session or a worker may
    hold it), otherwise any free port."""
    for port in (preferred, *ports.fallback_ports(preferred), 0):
        with socket.socket() as probe:
            try:
                probe.bind((HTTP_HOST, port))
            except OSError:
                continue
            return int(probe.getsockname()[1])
    raise AssertionError("port 0 is always free")


def serve_database(server: EmbeddedPostgres, out: TextIO) -> None:
    """``--db-only``: print the server's URL and wait for Ctrl-C (SIGINT) or SIGTERM."""
    out.write(
        f"PostgreSQL is ready; in another shell:\n"
        f"  export TICKWORK_DATABASE_URL='{server.conninfo}'\n"
        "Ctrl-C stops it\n"
    )
    out.flush()

    async def wait() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        await stop.wait()

    asyncio.run(wait())


def start(server: EmbeddedPostgres, out: TextIO) -> tuple[Worker, LiveView]:
    """Enqueue the example jobs; return the worker to run and the view that shows it."""
    app = examples.app
    app.configure(server.conninfo)
    view = LiveView(app, out)
    view.poll(quiet=True)  # jobs of earlier sessions are not news
    settings = worker_settings(server.conninfo)
    out.write(
        f"in another shell: export TICKWORK_DATABASE_URL={server.conninfo}\n"
        "  then try: tickwork jobs, or tickwork enqueue examples.hello --payload "
        '\'{"name": "you"}\'\n'
        f"worker {settings.name} serves {', '.join(app.registry.kinds)}; Ctrl-C stops\n"
        f"metrics: http://{settings.http_host}:{settings.http_port}/metrics "
        f"(and /healthz, /readyz){_moved(settings.http_port)}\n"
    )
    enqueue_examples(app, out)
    sync_examples(app, out)
    out.flush()
    return Worker(app, settings), view


def _moved(port: int) -> str:
    return f" ({HTTP_PORT} in use)" if port != HTTP_PORT else ""


def enqueue_examples(app: App, out: TextIO) -> None:
    """One job of each example task, one delayed, and one unique key enqueued twice."""
    for kind, payload in (
        ("examples.hello", {"name": "tickwork"}),
        ("examples.flaky", {}),
        ("examples.report", {"format": "text"}),
        ("examples.slow", {"seconds": 3}),
    ):
        app.enqueue(kind, payload)
    later = datetime.now(UTC) + timedelta(seconds=DELAY_SECONDS)
    delayed = app.enqueue("examples.hello", {"name": "later"}, run_at=later)
    out.write(f"job {delayed} waits {DELAY_SECONDS} s before it may run\n")
    first = app.enqueue("examples.report", {"format": "unique"}, unique_key=UNIQUE_KEY)
    second = app.enqueue("examples.report", {"format": "unique"}, unique_key=UNIQUE_KEY)
    same = "the same job" if first == second else "a new job: the first had finished"
    out.write(
        f"unique key {UNIQUE_KEY!r} enqueued twice: job {first}, then job {second} ({same})\n"
    )


def sync_examples(app: App, out: TextIO) -> None:
    """Sync the example Schedules into their namespace, taking it over if someone else synced
    it: this database is the dev session's own."""
    with resources.as_file(SCHEDULES) as path:
        loaded = manifests.load_path(path, namespace=NAMESPACE)
    definitions = [definition for definition in loaded if definition.container is None]
    containers = sorted(definition.name for definition in loaded if definition.container)
    report = app.sync_schedules(NAMESPACE, definitions, owner=OWNER, take_over=True)
    changes = dataclasses.asdict(report)
    listed = "; ".join(f"{change} {', '.join(names)}" for change, names in changes.items() if names)
    out.write(
        f"schedules synced into namespace {NAMESPACE!r}: {listed}\n"
        f"  try: tickwork schedules, or tickwork trigger {NAMESPACE} hello\n"
    )
    if containers:
        out.write(
            f"not synced (a jobTemplate needs Kubernetes, docs/containers.md): "
            f"{', '.join(containers)}\n"
        )


class LiveView:
    """Prints one line per fired occurrence, per job state change and per schedule that
    skipped occurrences, by polling the newest jobs and the example schedules."""

    def __init__(self, app: App, out: TextIO) -> None:
        self._app = app
        self._out = out
        self._seen: dict[JobId, tuple[JobStatus, int]] = {}
        self._skipped: dict[str, int] = {}

    def poll(self, *, quiet: bool = False) -> None:
        jobs = sorted(self._app.list_jobs(limit=POLL_LIMIT), key=lambda job: job.id)
        schedules = self._app.list_schedules(NAMESPACE)
        seen, self._seen = self._seen, {job.id: (job.status, job.attempt) for job in jobs}
        skipped, self._skipped = self._skipped, {s.name: s.skipped_occurrences for s in schedules}
        if quiet:
            return
        now = datetime.now(UTC)
        for job in jobs:
            if job.id not in seen and job.schedule is not None:
                self._out.write(describe_fired(job, now) + "\n")
            if seen.get(job.id) != (job.status, job.attempt):
                self._out.write(describe(job, now) + "\n")
        for name, count in self._skipped.items():
            if count > skipped.get(name, count):
                self._out.write(
                    f"{_clock(now)}  schedule {NAMESPACE}/{name} skipped "
                    f"{count - skipped[name]} occurrence(s) by its policy ({count} in all)\n"
                )
        self._out.flush()

    async def run(self) -> None:
        while True:
            await asyncio.to_thread(self.poll)
            await sleep(POLL_SECONDS)


def describe(job: Job, now: datetime) -> str:
    """``12:00:03  job 7  examples.flaky   available  attempt 1/5 failed: ...``"""
    head = f"{_clock(now)}  job {job.id:<4} {job.kind:<16} {job.status.value:<10}"
    return f"{head} {_detail(job, now)}".rstrip()


def describe_fired(job: Job, now: datetime) -> str:
    """``12:00:10  schedule examples/hello fired 12:00:10 as job 7 (available)``; a manual
    trigger has no occurrence."""
    assert job.schedule is not None
    what = f"schedule {job.schedule.namespace}/{job.schedule.name}"
    occurrence = job.schedule.occurrence_at
    fired = "triggered by hand" if occurrence is None else f"fired {_clock(occurrence)}"
    return f"{_clock(now)}  {what} {fired} as job {job.id} ({job.status.value})"


def _detail(job: Job, now: datetime) -> str:
    attempts = f"attempt {job.attempt}/{job.max_attempts or '-'}"
    error = executor.summary(job.last_error)
    if job.status is JobStatus.AVAILABLE:
        due = "runs now" if job.run_at <= now else f"runs at {_clock(job.run_at)}"
        return f"{attempts} failed: {error}; {due}" if error else f"enqueued, {due}"
    if job.status is JobStatus.RUNNING:
        return f"{attempts} on {job.picked_by}"
    if job.status is JobStatus.SUCCEEDED:
        return f"{attempts}, took {_seconds(job.started_at, job.finished_at)}"
    if job.status is JobStatus.DEAD:
        return f"after {attempts}: {error}"
    return ""


def _clock(instant: datetime) -> str:
    return instant.astimezone().strftime("%H:%M:%S")


def _seconds(start: datetime | None, end: datetime | None) -> str:
    if start is None or end is None:
        return "?"
    return f"{(end - start).total_seconds():.2f} s"
