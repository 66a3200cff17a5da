"""The worker process: claims jobs in batches, runs them N at a time, writes outcomes back,
keeps leases alive and shares the maintenance duties. One asyncio loop; sync tasks run in a
thread pool; the heartbeat and the loop's watch run in threads of their own.

Life of a job here: claimed (lease taken, lined up in :class:`~.held.HeldJobs`) → started by
a slot → outcome written (successes batched by the completer, failures one by one) →
forgotten. The heartbeat (:mod:`.heartbeat`, its own thread and connection, so a task blocking
the loop does not stop it) extends the leases of every job held; a job whose lease could not
be extended was taken over elsewhere, and its outcome is dropped. A job asked to stop (its
cancellation notified on ``tickwork_cancel``, which makes the heartbeat run at once, or seen by
the next heartbeat) is stopped — an async task is cancelled, a sync one runs on, since Python
cannot stop a thread — and recorded ``cancelled`` when its task has returned; it holds its
lease and concurrency key until then.

A cut connection or a database restart loses nothing here: an outcome write, a heartbeat or a
claim that fails is retried on a new connection with backoff (each loop logs once that it is
failing and once that it is back), fenced by version like every state change, so a job whose
task finished runs again only if this process really died. Jobs a lost claim answer left
running under this process's incarnation (:mod:`.identity`; never another process's, even of
the same name) are adopted by the next claim. No loop stops on an error.

Stopping: claimed jobs not started are handed back at once; running ones get the shutdown
grace, and a job still running when it ends is interrupted and handed back, its attempt not
spent (``--max-interruptions``: a job interrupted more often ends dead).

Its parts, each a loop with one round callable on its own (``run_once``) where that means
something: :mod:`.claiming` (the claimer), :mod:`.slots` (running jobs, stopping them),
:mod:`.outcomes` (writing outcomes, the completer), :mod:`.heartbeat` (start, run once, stop),
:mod:`.listener` (LISTEN), :mod:`.maintaining` (the services of
:func:`tickwork.maintenance.duties.fleet_duties` and the pending on_dead hooks); and
:mod:`.identity` (name and incarnation), :mod:`.held` (each held job's one record, the line of
claimed jobs), :mod:`.loop_watch` (reports a task blocking the loop), :mod:`.liveness`
(``/healthz``), :mod:`.executor` (running one task), :mod:`.retry` and :mod:`.deaths`. This
module wires them, registers the process, and stops it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import replace
from typing import Any

from tickwork import logs, metrics
from tickwork import progress as job_progress
from tickwork.app import App
from tickwork.clock import Clock, cancel_all
from tickwork.db import budget, connections, server, store
from tickwork.db import jobs as jobs_db
from tickwork.db import workers as workers_db
from tickwork.flow import task_rules
from tickwork.logs import fields
from tickwork.maintenance import duties, firing
from tickwork.maintenance.service import Service
from tickwork.model import SPAWNER, Job
from tickwork.settings import WorkerSettings
from tickwork.worker import deaths, identity, loop_watch, steps
from tickwork.worker.claiming import Claimer
from tickwork.worker.heartbeat import Heartbeat, HeartbeatConfig
from tickwork.worker.held import HeldJobs
from tickwork.worker.listener import Listener
from tickwork.worker.liveness import Liveness
from tickwork.worker.maintaining import MaintenanceLoop
from tickwork.worker.outcomes import Outcomes
from tickwork.worker.progress import ProgressWriter
from tickwork.worker.slots import Slots

log = logging.getLogger(__name__)

Pool = connections.AsyncPool
Loop = Callable[["Worker"], Coroutine[Any, Any, None]]

FORCED_EXIT_SECONDS = 3.0
"""On a forced exit, how long handing back the jobs and removing the row may take."""


class Worker:
    """Serve ``app``'s tasks until :meth:`stop` is called."""

    def __init__(
        self,
        app: App,
        settings: WorkerSettings,
        *,
        clock: Clock | None = None,
        extra_loops: tuple[Loop, ...] = (),
        meters: metrics.JobMeters | None = None,
    ) -> None:
        self.app = app
        self.settings = settings
        self.clock = clock or app.clock
        """The App's clock unless another is given (tests run workers at different times)."""
        self.name = settings.name
        """The name, for people: ``settings.name``, or with a suffix (:mod:`.identity`)."""
        self.incarnation = uuid.uuid4()
        """This process start's identity: claims, adoption, heartbeats and its row go by it."""
        steps.register(app)  # every worker runs the occurrences of schedules with steps
        self.kinds = app.registry.kinds
        self.queues = list(settings.queues) or sorted({"default", *app.registry.queues()})
        self._extra_loops = extra_loops
        self.held = HeldJobs()
        """Every job held, from its claim until its outcome; the claimed ones wait here."""
        self._schedules_wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._pool: Pool | None = None
        self.footprint = _footprint(settings)
        """The most connections this process holds on the server (:mod:`tickwork.db.budget`,
        which also sizes its pool): what its row records and its start-up budget counts."""
        self.meters = meters or metrics.JobMeters()
        self._liveness = Liveness()
        pool = lambda: self.pool  # noqa: E731 (the pool opens in run)
        self.claimer = Claimer(
            name=self.name,
            incarnation=self.incarnation,
            queues=self.queues,
            kinds=self.kinds,
            max_attempts={kind: task.max_attempts for kind, task in app.registry.items()},
            settings=settings,
            clock=self.clock,
            held=self.held,
            meters=self.meters,
            pool=pool,
        )
        self.outcomes = Outcomes(
            name=self.name,
            registry=app.registry,
            clock=self.clock,
            meters=self.meters,
            held=self.held,
            pool=pool,
            stopping=self._stopping,
            grace_seconds=settings.shutdown_grace_seconds,
            max_interruptions=settings.max_interruptions,
        )
        self.progress = ProgressWriter(held=self.held, pool=pool, clock=self.clock)
        """Writes the progress the tasks report (:mod:`.progress`)."""
        self.slots = Slots(
            name=self.name,
            registry=app.registry,
            concurrency=settings.concurrency,
            clock=self.clock,
            held=self.held,
            outcomes=self.outcomes,
            estimates=self.claimer.estimates,
            meters=self.meters,
            stopping=self._stopping,
            pool=pool,
            progress=self.progress,
        )
        self._heartbeat = Heartbeat(
            HeartbeatConfig(
                url=settings.database_url,
                incarnation=self.incarnation,
                lease_seconds=settings.lease_seconds,
                interval=settings.heartbeat_seconds,
            ),
            clock=self.clock,
            held=self.held,
            liveness=self._liveness,
            found=self.slots.found,
        )
        self.maintenance = MaintenanceLoop(
            name=self.name,
            services=_services(app, settings, self.meters),
            interval=settings.maintenance_seconds,
            clock=self.clock,
            liveness=self._liveness,
            pool=pool,
        )
        self._watch = loop_watch.LoopWatch(
            stall_seconds=loop_watch.threshold(settings.lease_seconds),
            job_of=self.held.running_on,
            worker=self.name,
        )
        self.started = asyncio.Event()
        self.failed = False
        """True when a loop crashed; the command exits non-zero."""

    @property
    def running_jobs(self) -> int:
        """Jobs whose task is running in this worker now."""
        return len(self.held.running())

    @property
    def pool(self) -> Pool:
        assert self._pool is not None, "worker not started"
        return self._pool

    def stop(self) -> None:
        """Begin a graceful shutdown (safe to call from a signal handler on the loop)."""
        self._stopping.set()

    def liveness(self, at: float | None = None) -> str | None:
        """The ``/healthz`` check: None while every loop is alive, otherwise which one crashed
        or is stuck. ``at`` is a ``time.monotonic()`` instant (default: now)."""
        return self._liveness.check(at)

    # --- one round of each loop, for tests and tools ----------------------------------

    async def claim_once(self, limit: int) -> list[Job]:
        """One claim statement (:meth:`Claimer.run_once`)."""
        return await self.claimer.run_once(limit)

    async def heartbeat_once(self) -> None:
        """One heartbeat now, as the heartbeat thread runs it (in a thread, on the heartbeat's
        connection), its findings applied."""
        self.slots.found(await asyncio.to_thread(self._heartbeat.run_once))

    async def maintain_once(self) -> None:
        """One round of the maintenance services (:meth:`MaintenanceLoop.run_once`)."""
        await self.maintenance.run_once()

    # --- the whole process ------------------------------------------------------------

    async def run(self) -> None:
        # The whole budget of a worker's connections is tickwork.db.budget's.
        self._pool = connections.async_pool(
            self.settings.database_url,
            min_size=budget.WORKER_POOL_MIN,
            max_size=budget.WORKER_POOL,
            prepare=self.settings.prepare,
        )
        await self._pool.open(wait=True, timeout=15)
        self._watch.start()
        try:
            await self.check_budget()
            await self._register()
            logs.CURRENT_WORKER.set(self.name)  # the tasks started below inherit it
            job_progress.SINK.set(self.progress.report)  # and the sink of job.progress()
            SPAWNER.set(self.app)  # and job.spawn creates their jobs through this App
            tasks = [(kind, task.rule) for kind, task in self.app.registry.items()]
            await asyncio.to_thread(task_rules.write, self.settings.database_url, tasks, self.name)
            self._heartbeat.start()
            slots = [
                asyncio.create_task(self.slots.run(), name=f"slot-{i}")
                for i in range(self.settings.concurrency)
            ]
            completer = asyncio.create_task(self.outcomes.completer(), name="completer")
            background: list[asyncio.Task[None]] = [
                asyncio.create_task(coro, name=name)
                for name, coro in (
                    ("claimer", self.claimer.run()),
                    ("listener", self._listener().run()),
                    ("maintenance", self.maintenance.run()),
                    ("progress", self.progress.run()),
                    *self._firing(),
                    *((loop.__name__, loop(self)) for loop in self._extra_loops),
                )
            ]
            for task in (*slots, completer, *background):
                task.add_done_callback(self._crashed)
            log.info(
                "worker started (incarnation %s)",
                self.incarnation,
                extra=fields(
                    action="worker_started", worker=self.name, queue=",".join(self.queues)
                ),
            )
            self.started.set()
            await self._stopping.wait()
            await self._shut_down(slots, completer, background)
        finally:
            await asyncio.to_thread(self._heartbeat.stop)  # stopped already, unless it failed
            await asyncio.to_thread(self._watch.stop)
            self.slots.threads.shutdown(wait=False, cancel_futures=True)
            await self._pool.close()

    def _listener(self) -> Listener:
        return Listener(
            settings=self.settings,
            queues=self.queues,
            held=self.held,
            jobs=self.claimer.wake,
            schedules=self._schedules_wake,
            cancels=self._heartbeat.wake,
        )

    def _crashed(self, task: asyncio.Task[None]) -> None:
        """A loop that ends with an error stops the whole worker: no silent half-worker."""
        if task.cancelled() or task.exception() is None:
            return
        self._liveness.crash = f"loop {task.get_name()} crashed: {task.exception()!r}"
        log.error(
            "worker loop %s failed; shutting down",
            task.get_name(),
            exc_info=task.exception(),
            extra=fields(action="worker_crashed"),
        )
        self.failed = True
        self.stop()

    async def check_budget(self) -> budget.Verdict | None:
        """Log the connection budget once, before registering (:func:`check_budget`)."""
        pool = lambda: self.pool  # noqa: E731 (not opened behind a pooler)
        return await check_budget(pool, self.settings, self.footprint, self.clock, self.name)

    async def _register(self) -> None:
        """Register this process under its name, or the default name with a suffix; raise
        :class:`identity.NameTaken` when a live process holds the name (:mod:`.identity`)."""

        async def write(name: str) -> workers_db.Holder | None:
            async with self.pool.connection() as conn:
                return await store.arun(
                    conn,
                    workers_db.register_worker(
                        name=name,
                        incarnation=self.incarnation,
                        queues=self.queues,
                        kinds=self.kinds,
                        namespaces=list(self.settings.namespaces),
                        concurrency=self.settings.concurrency,
                        host=socket.gethostname(),
                        pid=os.getpid(),
                        heartbeat_seconds=self.settings.heartbeat_seconds,
                        ttl_seconds=self.settings.worker_ttl_seconds,
                        connections=self.footprint.total,
                        now=self.clock.now(),
                    ),
                )

        async def persisted(name: str) -> workers_db.Holder | None:
            return (await self.outcomes.persist("registering the worker", lambda: write(name)))[0]

        name = await identity.register(persisted, self.settings.name, self.incarnation)
        if name != self.name:
            log.warning(
                "the default worker name %s is held by a live worker: this one is %s",
                self.name,
                name,
                extra=fields(action="worker_renamed", worker=name),
            )
        self.name = name
        for part in (self.claimer, self.outcomes, self.slots, self.maintenance):
            part.name = name
        self._watch.worker = name

    def _firing(self) -> list[tuple[str, Coroutine[Any, Any, None]]]:
        """The schedule firing loop, when this worker offers namespaces."""
        if not self.settings.namespaces:
            return []
        config = firing.FiringConfig()
        if not self.settings.notifications_url:  # no sync notification: look every poll
            config = replace(config, max_sleep=min(config.max_sleep, self.settings.poll_seconds))
        loop = firing.loop(
            self.pool,
            firing.Firing(
                self.settings.namespaces,
                config,
                firing.Shares(
                    self.name,
                    self.settings.namespaces,
                    ttl=self.settings.worker_ttl_seconds,
                    wait=config.share_wait,
                    refresh=config.share_refresh,
                    parts=config.connections,
                ),
                self.pool,
            ),
            clock=self.clock,
            wake=self._schedules_wake,
            alive=lambda config: self._liveness.beat("firing", config.max_sleep),
        )
        return [("firing", loop)]

    # --- stopping ----------------------------------------------------------------------

    async def _shut_down(
        self,
        slots: list[asyncio.Task[None]],
        completer: asyncio.Task[None],
        background: list[asyncio.Task[None]],
    ) -> None:
        log.info(
            "shutting down: no new claims", extra=fields(action="worker_stopping", worker=self.name)
        )
        await cancel_all(background)
        await self._hand_back_unstarted()
        self.slots.interrupt_handed_back()
        self.held.stop_slots(len(slots))
        _, late = await asyncio.wait(slots, timeout=self.settings.shutdown_grace_seconds)
        if late:
            log.warning(
                "grace period over: interrupting running jobs",
                extra=fields(action="jobs_interrupted", count=self.running_jobs),
            )
            for slot in self.held.running():
                slot.cancel()
            await asyncio.wait(late)
        self.outcomes.close()
        await asyncio.gather(completer, return_exceptions=True)
        await asyncio.to_thread(self._heartbeat.stop)  # the leases are kept until the last write
        try:
            async with self.pool.connection() as conn:
                await store.arun(conn, workers_db.deregister_worker(self.incarnation))
        except connections.ConnectionLost as exc:  # its row expires (--worker-ttl-seconds)
            log.warning("could not deregister: %s", exc, extra=fields(action="deregister_failed"))
        log.info("worker stopped", extra=fields(action="worker_stopped", worker=self.name))

    async def _hand_back_unstarted(self) -> None:
        unstarted = self.held.unstarted()
        if not unstarted:
            return
        try:
            async with self.pool.connection() as conn:
                returned = await store.arun(
                    conn, jobs_db.hand_back_jobs(unstarted, self.clock.now())
                )
        except connections.ConnectionLost as exc:  # their leases run out: they run elsewhere
            log.warning(
                "could not hand back %d claimed jobs: %s",
                len(unstarted),
                exc,
                extra=fields(action="hand_back_failed", count=len(unstarted)),
            )
            return
        log.info(
            "handed back claimed jobs that had not started",
            extra=fields(action="jobs_handed_back", count=len(returned)),
        )

    def abandon(self) -> None:
        """A forced exit (a second signal) leaves at once: first, within
        :data:`FORCED_EXIT_SECONDS`, hand back the jobs held (running ones as interrupted) and
        remove this process's row, so that neither looks alive until leases and TTL run out.
        Blocks the caller (the loop, which is about to exit); best effort, in a thread that a
        database not answering cannot keep alive."""
        thread = threading.Thread(target=self._abandon, name="tickwork-abandon", daemon=True)
        thread.start()
        thread.join(FORCED_EXIT_SECONDS)

    def _abandon(self) -> None:
        held = [h for h in self.held if not h.finished]
        running = [h.job for h in held if h.slot is not None]
        waiting = [h.job for h in held if h.slot is None]
        now = self.clock.now()
        limit = self.settings.max_interruptions
        try:
            with connections.connect(self.settings.database_url, timeout=2) as conn:
                for job in running:
                    store.run(conn, jobs_db.interrupted(job, self.name, limit, now))
                store.run(conn, jobs_db.hand_back_jobs(waiting, now))
                store.run(conn, workers_db.deregister_worker(self.incarnation))
        except connections.DatabaseError as exc:
            log.warning(
                "forced exit: could not hand back %d jobs: %s",
                len(held),
                exc,
                extra=fields(action="hand_back_failed", count=len(held)),
            )
            return
        log.info(
            "forced exit: handed back %d running and %d waiting jobs",
            len(running),
            len(waiting),
            extra=fields(action="jobs_handed_back", count=len(held)),
        )


def _services(app: App, settings: WorkerSettings, meters: metrics.JobMeters) -> list[Service]:
    """What the maintenance loop runs, in order: the fleet's duties, then the pending on_dead
    hooks (only a worker registering a kind may run its hook)."""
    services: list[Service] = duties.fleet_duties(settings, meters)
    if app.registry.kinds:
        every = deaths.PendingHooksConfig(interval=settings.maintenance_seconds)
        services.append(deaths.PendingHooks(app.registry, every))
    return services


def _footprint(settings: WorkerSettings) -> budget.Footprint:
    return budget.worker(
        listening=bool(settings.notifications_url),
        probing=bool(settings.http_port),
        pooled=settings.pooler == "transaction",
    )


async def check_budget(
    pool: Callable[[], Pool],
    settings: WorkerSettings,
    footprint: budget.Footprint,
    clock: Clock,
    name: str,
) -> budget.Verdict | None:
    """Log the connection budget: the live fleet's connections and this worker's against the
    server's ``max_connections`` less its reserved slots (:func:`tickwork.db.budget.report`: a
    warning when tight, an error when over, and the worker starts all the same). Not compared
    behind a transaction pooler (None), nor when it cannot be read (None, with a warning)."""
    if settings.pooler == "transaction":
        budget.report_pooled(footprint, log, worker=name)
        return None
    try:
        async with pool().connection() as conn:
            found = await server.abudget(conn, footprint, clock.now())
    except Exception as exc:
        log.warning(
            "connection budget not checked: %s: %s",
            type(exc).__name__,
            " ".join(str(exc).split()) or "?",
            extra=fields(action="connection_budget", worker=name),
        )
        return None
    return budget.report(found, log, worker=name)
