"""The public face of tickwork: the task registry, enqueueing, and operator actions."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, TypedDict, TypeVar, Unpack

from tickwork import metrics, tracing
from tickwork.clock import Clock, DatabaseClock
from tickwork.db import budget, connections, store
from tickwork.db import jobs as jobs_db
from tickwork.errors import (
    ConfigurationError,
    InvalidInput,
    InvalidTransition,
)
from tickwork.flow import limits
from tickwork.flow.controls import FlowControls
from tickwork.job_controls import JobControls
from tickwork.logs import fields as log_fields
from tickwork.model import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_QUEUE,
    Backoff,
    Job,
    JobId,
    JobStatus,
    NewJob,
    Spawn,
)
from tickwork.schedules.controls import ScheduleControls
from tickwork.tasks import DeadHook, Registry, Task, TaskFunction, check_job_fields
from tickwork.workflows import after as workflow_after
from tickwork.workflows import spawn
from tickwork.workflows.after import check_after

T = TypeVar("T")
F = TypeVar("F", bound=TaskFunction)

_UNIQUE_RACE_RETRIES = 5

log = logging.getLogger(__name__)


class JobFields(TypedDict, total=False):
    """What :meth:`App.enqueue` takes besides kind and payload; each has a default."""

    queue: str | None
    """Default: the task's queue, else ``default``."""
    priority: int
    """0..32767, higher runs first; default 0."""
    run_at: datetime | None
    """Not before this (timezone-aware) instant; default now."""
    unique_key: str | None
    """While a job of this kind and key is available or running, return it instead."""
    max_attempts: int | None
    """Default: the task's (resolved when a worker claims the job, if this app does not
    register the task)."""
    retry: Backoff | None
    """Default: the task's policy."""
    timeout: float | None
    """Seconds; default: the task's."""
    concurrency_key: str | None
    """At most ``concurrency_limit`` running jobs per key across the fleet."""
    concurrency_limit: int | None
    """How many jobs of ``concurrency_key`` may run at once (1 to 10,000); default 1."""
    after: Sequence[int] | None
    """Ids of jobs (of the same tenant: enqueued from code) to wait for: the job runs once all
    have succeeded, and is cancelled if one ends dead or cancelled (docs/workflows.md)."""


class App(FlowControls, ScheduleControls, JobControls):
    """Tasks plus a database: ``App(database_url)``; the URL defaults to
    ``$TICKWORK_DATABASE_URL``. Connections are opened on first use."""

    def __init__(
        self,
        database_url: str | None = None,
        *,
        clock: Clock | None = None,
        check_connections: bool = False,
        notify: bool = True,
    ) -> None:
        """``check_connections``: try each pooled connection of the sync API before using it
        (one round trip), so that the first call after a cut connection or a database restart
        does not fail on a dead one; for long-lived processes that call rarely (the console).

        ``notify``: an enqueue in a transaction of its own wakes the workers of its queue with
        a notification sent after its commit (one per call, none for a job due later). False:
        no notification, the workers find the jobs by polling (``--poll-seconds``); for
        producers whose enqueue rate matters more than the workers' wake-up time. An enqueue
        with ``conn`` notifies at the caller's commit (the table's trigger) either way."""
        self._database_url = database_url
        self._check_connections = check_connections
        self._notify = notify
        self.clock: Clock = clock or DatabaseClock()
        self.registry = Registry()
        self._pool: connections.Pool | None = None
        self._async_pool: connections.AsyncPool | None = None

    # --- configuration ---------------------------------------------------------------

    @property
    def database_url(self) -> str:
        url = self._database_url or os.environ.get("TICKWORK_DATABASE_URL")
        if not url:
            raise ConfigurationError(
                "no database: pass App(database_url) or set TICKWORK_DATABASE_URL"
            )
        return url

    def configure(self, database_url: str) -> None:
        """Point the app at a database (the worker command does this from its settings)."""
        self._database_url = database_url

    def task(
        self,
        kind: str,
        *,
        queue: str = DEFAULT_QUEUE,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        retry: Backoff | None = None,
        timeout: float | None = None,
        on_dead: DeadHook | None = None,
        max_running: int | None = None,
        rate: str | limits.Rate | None = None,
        rate_key: str | None = None,
    ) -> Callable[[F], F]:
        """Register a function (sync or async, taking a :class:`Job`) as task ``kind``.

        ``max_running``: at most that many jobs of the kind run at once, fleet-wide; ``rate``:
        at most so many start per period (``"10/s"``, ``"100/min"``, ``"50/10s"``), per value of
        the payload field ``rate_key`` when given. They are the kind's flow rule, which every
        worker registering the task writes at its start (audited, actor ``task``): the last
        worker to start wins when versions disagree, and a rule a person set for the kind is
        left alone (docs/flow-control.md). Invalid values raise InvalidInput naming the field."""

        def register(function: F) -> F:
            self.registry.add(
                Task(
                    kind,
                    function,
                    queue,
                    max_attempts,
                    retry or Backoff(),
                    timeout,
                    on_dead,
                    max_running=max_running,
                    rate=limits.Rate.parse(rate) if isinstance(rate, str) else rate,
                    rate_key=rate_key,
                )
            )
            return function

        return register

    # --- connections -------------------------------------------------------------------

    @contextmanager
    def connection(self) -> Iterator[connections.Connection]:
        """A pooled connection in a transaction that commits on success."""
        if self._pool is None:
            # One connection first: an unreachable database is one clear DatabaseUnavailable
            # (where and why) within the connect timeout, not a PoolTimeout after it.
            connections.check(self.database_url)
            pool = connections.pool(
                self.database_url, max_size=budget.APP_POOL, check=self._check_connections
            )
            pool.open(wait=True, timeout=10)
            self._pool = pool
        with self._pool.connection() as conn, connections.schema_required():
            yield conn

    def _run(self, op: store.Op[T], conn: connections.Connection | None = None) -> T:
        if conn is not None:
            with connections.schema_required():
                return store.run(conn, op)
        with self.connection() as own:
            return store.run(own, op)

    async def _async_pool_get(self) -> connections.AsyncPool:
        if self._async_pool is None:
            await asyncio.to_thread(connections.check, self.database_url)
            pool = connections.async_pool(self.database_url, min_size=1, max_size=budget.APP_POOL)
            await pool.open(wait=True, timeout=10)
            self._async_pool = pool
        return self._async_pool

    async def _arun(self, op: store.Op[T], conn: connections.AsyncConnection | None = None) -> T:
        with connections.schema_required():
            if conn is not None:
                return await store.arun(conn, op)
            pool = await self._async_pool_get()
            async with pool.connection() as own:
                return await store.arun(own, op)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    async def close_async(self) -> None:
        if self._async_pool is not None:
            await self._async_pool.close()
            self._async_pool = None
        self.close()

    # --- enqueueing --------------------------------------------------------------------

    def _new_job(self, kind: str, payload: Any, fields: JobFields) -> NewJob:
        """The job ``fields`` describe, checked; the task's settings fill what they leave out."""
        task = self.registry.get(kind)
        queue = fields.get("queue") or (task.queue if task else DEFAULT_QUEUE)
        max_attempts = fields.get("max_attempts")
        if max_attempts is None and task is not None:
            max_attempts = task.max_attempts  # else the claiming worker's task decides
        priority = fields.get("priority", 0)
        timeout = fields.get("timeout")
        run_at = fields.get("run_at")
        check_job_fields(
            kind=kind,
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            timeout=timeout,
            unique_key=fields.get("unique_key"),
            concurrency_key=fields.get("concurrency_key"),
        )
        concurrency_limit = fields.get("concurrency_limit")
        if concurrency_limit is not None:
            if fields.get("concurrency_key") is None:
                raise InvalidInput("concurrency_limit", "needs a concurrency_key to limit")
            concurrency_limit = limits.check_concurrency_limit(concurrency_limit)
        if run_at is not None and run_at.tzinfo is None:
            raise InvalidInput("run_at", "must be timezone-aware")
        if fields.get("after") and fields.get("unique_key") is not None:
            raise InvalidInput("unique_key", "cannot be combined with after")
        return NewJob(
            kind=kind,
            queue=queue,
            payload=payload,
            priority=priority,
            run_at=run_at,
            max_attempts=max_attempts,
            retry=fields.get("retry"),
            timeout=timeout,
            concurrency_key=fields.get("concurrency_key"),
            concurrency_limit=concurrency_limit,
            unique_key=fields.get("unique_key"),
        )

    def _insert_many(
        self, kind: str, payloads: Sequence[Any], fields: JobFields
    ) -> tuple[NewJob, store.Op[list[JobId]]]:
        if fields.get("unique_key") is not None:
            raise InvalidInput("unique_key", "not supported by enqueue_many")
        template = self._new_job(kind, None, fields)
        op = jobs_db.insert_jobs(template, payloads, self.clock.now(), tracing.capture())
        return template, op

    def _enqueue_after(
        self,
        template: NewJob,
        payloads: Sequence[Any],
        after: list[int],
        conn: connections.Connection | None,
    ) -> list[JobId]:
        """Jobs like ``template`` waiting for ``after`` (:mod:`tickwork.workflows.after`);
        the workers are woken only for jobs that start available."""
        now, trace = self.clock.now(), tracing.capture()

        def insert(c: connections.Connection) -> tuple[list[JobId], JobStatus]:
            return workflow_after.enqueue_after(c, template, payloads, after, now, trace)

        ids, _ = self._insert(insert, template, conn, lambda r: r[1] is JobStatus.AVAILABLE)
        _count_enqueued(template, len(ids))
        return ids

    def _insert(
        self,
        op: store.Op[T] | Callable[[connections.Connection], T],
        job: NewJob,
        conn: connections.Connection | None,
        created: Callable[[T], bool],
    ) -> T:
        """Run an insert ``op`` (or a function of the connection) in ``conn``'s transaction
        (the trigger notifies at the caller's commit), or in a transaction of its own that
        notifies nobody, followed after its commit by one notification when
        ``created(result)`` says a job was made."""
        if conn is not None:
            if isinstance(op, store.Op):
                return self._run(op, conn)
            with connections.schema_required():
                return op(conn)
        with self.connection() as own:
            store.run(own, jobs_db.inserts_quiet())
            result = store.run(own, op) if isinstance(op, store.Op) else op(own)
            own.commit()
            if self._notify and created(result):
                own.autocommit = True  # one statement, one round trip: no BEGIN, no COMMIT
                try:
                    store.run(own, self._notification(job))
                except connections.DatabaseError as exc:
                    _notify_failed(job, exc)
                finally:
                    if not own.closed:  # a broken one is discarded by the pool
                        own.autocommit = False
            return result

    async def _ainsert(
        self,
        op: store.Op[T],
        job: NewJob,
        conn: connections.AsyncConnection | None,
        created: Callable[[T], bool],
    ) -> T:
        """:meth:`_insert` for asyncio code."""
        if conn is not None:
            return await self._arun(op, conn)
        pool = await self._async_pool_get()
        with connections.schema_required():
            async with pool.connection() as own:
                await store.arun(own, jobs_db.inserts_quiet())
                result = await store.arun(own, op)
                await own.commit()
                if self._notify and created(result):
                    await own.set_autocommit(True)  # one statement, one round trip
                    try:
                        await store.arun(own, self._notification(job))
                    except connections.DatabaseError as exc:
                        _notify_failed(job, exc)
                    finally:
                        if not own.closed:
                            await own.set_autocommit(False)
                return result

    def _notification(self, job: NewJob) -> store.Op[None]:
        return jobs_db.notify_queue(job.queue, job.run_at, self.clock.now())

    def enqueue(
        self,
        kind: str,
        payload: Any = None,
        *,
        conn: connections.Connection | None = None,
        **fields: Unpack[JobFields],
    ) -> JobId:
        """Add a job; returns its id (the existing job's id when ``unique_key`` matches an
        open job). With ``conn``, the insert joins that connection's open transaction. The
        current trace context, if any, goes with it (:mod:`tickwork.tracing`). No worker is
        asked whether it serves ``kind`` (``tickwork enqueue`` does): a job of a kind nobody
        serves waits, available, until a worker registering it starts."""
        job = self._new_job(kind, {} if payload is None else payload, fields)
        if after := check_after(fields.get("after")):
            return self._enqueue_after(job, [job.payload], after, conn)[0]
        op = jobs_db.insert_job(job, self.clock.now(), tracing.capture())
        for _ in range(_UNIQUE_RACE_RETRIES):
            result = self._insert(op, job, conn, _created)
            if result is not None:
                _count_enqueued(job, int(result.created))
                return result.id
        raise InvalidTransition(f"could not settle the unique key of a {kind!r} job")

    async def enqueue_async(
        self,
        kind: str,
        payload: Any = None,
        *,
        conn: connections.AsyncConnection | None = None,
        **fields: Unpack[JobFields],
    ) -> JobId:
        """:meth:`enqueue` for asyncio code."""
        job = self._new_job(kind, {} if payload is None else payload, fields)
        if check_after(fields.get("after")):
            raise InvalidInput("after", "not supported by enqueue_async: use enqueue")
        op = jobs_db.insert_job(job, self.clock.now(), tracing.capture())
        for _ in range(_UNIQUE_RACE_RETRIES):
            result = await self._ainsert(op, job, conn, _created)
            if result is not None:
                _count_enqueued(job, int(result.created))
                return result.id
        raise InvalidTransition(f"could not settle the unique key of a {kind!r} job")

    def enqueue_many(
        self,
        kind: str,
        payloads: Sequence[Any],
        *,
        conn: connections.Connection | None = None,
        **fields: Unpack[JobFields],
    ) -> list[JobId]:
        """Add many jobs of one kind in a single statement; ids in payload order.
        Takes the fields of :meth:`enqueue` except ``unique_key``."""
        if after := check_after(fields.get("after")):
            template = self._new_job(kind, None, fields)
            return self._enqueue_after(template, payloads, after, conn)
        template, op = self._insert_many(kind, payloads, fields)
        ids = self._insert(op, template, conn, bool)
        _count_enqueued(template, len(ids))
        return ids

    async def enqueue_many_async(
        self,
        kind: str,
        payloads: Sequence[Any],
        *,
        conn: connections.AsyncConnection | None = None,
        **fields: Unpack[JobFields],
    ) -> list[JobId]:
        """:meth:`enqueue_many` for asyncio code."""
        if check_after(fields.get("after")):
            raise InvalidInput("after", "not supported by enqueue_many_async: use enqueue_many")
        template, op = self._insert_many(kind, payloads, fields)
        ids = await self._ainsert(op, template, conn, bool)
        _count_enqueued(template, len(ids))
        return ids

    # --- workflows ----------------------------------------------------------------------

    def spawn(
        self, job: Job, jobs: Sequence[Spawn], join: Spawn | None = None, key: str = "spawn"
    ) -> list[JobId]:
        """What :meth:`Job.spawn` does, for the running ``job``
        (:mod:`tickwork.workflows.spawn`); the worker hands this App to its tasks for it."""
        planned = spawn.plan(jobs, join, key)
        news = []
        for i, entry in enumerate(planned.entries):
            field = "join" if join is not None and i == len(planned.entries) - 1 else f"jobs[{i}]"
            fields = JobFields(
                queue=entry.queue,
                priority=entry.priority,
                max_attempts=entry.max_attempts,
                retry=entry.retry,
                timeout=entry.timeout,
                concurrency_key=entry.concurrency_key,
                concurrency_limit=entry.concurrency_limit,
            )
            try:
                new = self._new_job(
                    entry.kind, {} if entry.payload is None else entry.payload, fields
                )
            except InvalidInput as exc:
                raise InvalidInput(f"{field}.{exc.field}", exc.reason) from None
            news.append(spawn.tenant_of(job, new))
        now, trace = self.clock.now(), tracing.capture()
        with self.connection() as conn:
            ids = spawn.spawn_jobs(conn, job, planned, news, key, now, trace)
        for new in news:
            _count_enqueued(new, 1)
        return ids

    async def spawn_async(
        self, job: Job, jobs: Sequence[Spawn], join: Spawn | None = None, key: str = "spawn"
    ) -> list[JobId]:
        """:meth:`spawn` for async tasks (on a thread: one short transaction)."""
        return await asyncio.to_thread(self.spawn, job, jobs, join, key)


def _created(result: jobs_db.Enqueued | None) -> bool:
    return result is not None and result.created


def _notify_failed(job: NewJob, exc: Exception) -> None:
    """The job is committed; only its wake-up is lost: the workers' polling finds it."""
    log.warning(
        "job enqueued, but its notification failed: %s",
        exc,
        extra=log_fields(action="notify_failed", kind=job.kind, queue=job.queue),
    )


def _count_enqueued(job: NewJob, count: int) -> None:
    """``tickwork_jobs_enqueued_total``: new jobs only (not a unique key's existing one)."""
    if count:
        metrics.JOBS_ENQUEUED.labels(metrics.NO_SCHEDULE, job.queue, job.kind).inc(count)
