"""The worker process: claims jobs in batches, runs them N at a time, writes outcomes back,
keeps leases alive and shares the maintenance duties. One asyncio loop; sync tasks run in a
thread pool; the heartbeat and the loop's watch run in threads of their own.

Life of a job here: claimed (lease taken, in ``_buffer``) → started by a slot → outcome
written (successes batched by the completer, failures one by one) → forgotten. The heartbeat
(:mod:`.heartbeat`, its own thread and connection, so a task blocking the loop does not stop
it) extends the leases of every job held; a job whose lease could not be extended was taken
over elsewhere, and its outcome is dropped. A job asked to stop (its cancellation notified on
``tickwork_cancel``, which makes the heartbeat run at once, or seen by the next heartbeat) is
stopped — an async task is cancelled, a sync one runs on, since Python cannot stop a thread —
and recorded ``cancelled`` when its task has returned; it holds its lease and concurrency key
until then.

A cut connection or a database restart loses nothing here: an outcome write, a heartbeat or a
claim that fails is retried on a new connection with backoff (each loop logs once that it is
failing and once that it is back), fenced by version like every state change, so a job whose
task finished runs again only if this process really died. Jobs a lost claim answer left
running under this process's incarnation (:mod:`.identity`; never another process's, even of
the same name) are adopted by the next claim. No loop stops on an error.

Stopping: claimed jobs not started are handed back at once; running ones get the shutdown
grace, and a job still running when it ends is interrupted and handed back, its attempt not
spent (``--max-interruptions``: a job interrupted more often ends dead).

Its parts: :mod:`.identity` (name and incarnation), :mod:`.held` (each held job's one
record), :mod:`.outcomes` (writing outcomes, the completer), :mod:`.heartbeat`,
:mod:`.loop_watch` (reports a task blocking the loop), :mod:`.liveness` (``/healthz``),
:mod:`.executor` (running one task),
:mod:`.retry` and :mod:`.deaths`; the maintenance loop runs the services of
:func:`tickwork.maintenance.duties.fleet_duties` (and the pending on_dead hooks).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from tickwork import logs, metrics
from tickwork.app import App
from tickwork.clock import Clock, cancel_all, sleep
from tickwork.db import budget, connections, server, store
from tickwork.db import duties as duties_db
from tickwork.db import jobs as jobs_db
from tickwork.db import workers as workers_db
from tickwork.errors import InvalidInput
from tickwork.flow import task_rules
from tickwork.flow.look import RuleLook
from tickwork.logs import fields
from tickwork.maintenance import duties, firing
from tickwork.maintenance.service import Service
from tickwork.model import Job, JobId
from tickwork.settings import WorkerSettings
from tickwork.tasks import CANCEL_REQUESTED
from tickwork.worker import deaths, executor, identity, loop_watch, prefetch
from tickwork.worker.heartbeat import Beat, Heartbeat, HeartbeatConfig
from tickwork.worker.held import Held, HeldJobs, job_fields
from tickwork.worker.liveness import Liveness
from tickwork.worker.outcomes import Outcomes, after_error

log = logging.getLogger(__name__)

Pool = connections.AsyncPool
Loop = Callable[["Worker"], Coroutine[Any, Any, None]]

_CANCELLED_ERROR = "interrupted: the task was cancelled"
"""A task that raised CancelledError itself (not asked to stop, the worker not stopping)."""
_TURN_SECONDS = 0.001
"""A slot running jobs that never wait yields to the loop after this long."""
FORCED_EXIT_SECONDS = 3.0
"""On a forced exit, how long handing back the jobs and removing the row may take."""
CANCEL_CHANNEL = "tickwork_cancel"
"""Notified with a job's id when it is asked to stop (trigger jobs_notify_cancel_requested)."""


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
        self.kinds = app.registry.kinds
        self._max_attempts = {kind: task.max_attempts for kind, task in app.registry.items()}
        self.queues = list(settings.queues) or sorted({"default", *app.registry.queues()})
        self._extra_loops = extra_loops
        self._rules = RuleLook()
        """Whether the next claim locks the flow rules first (job_claim_rules)."""
        self.estimates = prefetch.Estimates()
        """Claim round trip and time per job, measured: how many jobs to hold ahead."""
        self._buffer: asyncio.Queue[Job | None] = asyncio.Queue()
        self._room = asyncio.Event()
        self._held = HeldJobs(self._room)
        self._wake = asyncio.Event()
        self._schedules_wake = asyncio.Event()
        self._stopping = asyncio.Event()
        # Spare threads: a sync task that outlives its timeout keeps its thread (Python cannot
        # kill threads); the slots still bound how many tasks run at once.
        self._threads = ThreadPoolExecutor(
            2 * settings.concurrency, thread_name_prefix="tickwork-task"
        )
        self._pool: Pool | None = None
        self.footprint = budget.worker(
            listening=bool(settings.notifications_url),
            probing=bool(settings.http_port),
            pooled=settings.pooler == "transaction",
        )
        """The most connections this process holds on the server (:mod:`tickwork.db.budget`,
        which also sizes its pool): what its row records and its start-up budget counts."""
        self.meters = meters or metrics.JobMeters()
        self.outcomes = Outcomes(
            name=self.name,
            registry=app.registry,
            clock=self.clock,
            meters=self.meters,
            held=self._held,
            pool=lambda: self.pool,
            stopping=self._stopping,
            grace_seconds=settings.shutdown_grace_seconds,
            max_interruptions=settings.max_interruptions,
        )
        self.services: list[Service] = duties.fleet_duties(settings, self.meters)
        """What the maintenance loop runs, in order."""
        if self.kinds:  # only a worker registering a kind may run its on_dead hook
            every = deaths.PendingHooksConfig(interval=settings.maintenance_seconds)
            self.services.append(deaths.PendingHooks(app.registry, every))
        self._liveness = Liveness()
        self._heartbeat = Heartbeat(
            HeartbeatConfig(
                url=settings.database_url,
                incarnation=self.incarnation,
                lease_seconds=settings.lease_seconds,
                interval=settings.heartbeat_seconds,
            ),
            clock=self.clock,
            held=self._held,
            liveness=self._liveness,
            found=self._found,
        )
        self._watch = loop_watch.LoopWatch(
            stall_seconds=loop_watch.threshold(settings.lease_seconds),
            job_of=self._held.running_on,
            worker=self.name,
        )
        self.started = asyncio.Event()
        self.failed = False
        """True when a loop crashed; the command exits non-zero."""

    @property
    def running_jobs(self) -> int:
        """Jobs whose task is running in this worker now."""
        return len(self._held.running())

    @property
    def pool(self) -> Pool:
        assert self._pool is not None, "worker not started"
        return self._pool

    def jobs_ahead(self) -> int:
        """Jobs to hold beyond the free slots now: ``--prefetch`` when given, otherwise
        adapted to the measured claim round trip and time per job (:mod:`.prefetch`)."""
        if self.settings.prefetch is not None:
            return self.settings.prefetch
        return self.estimates.ahead(self.settings.concurrency, 2 * self.settings.claim_batch)

    def stop(self) -> None:
        """Begin a graceful shutdown (safe to call from a signal handler on the loop)."""
        self._stopping.set()

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
        held = [h for h in self._held if not h.finished]
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

    def liveness(self, at: float | None = None) -> str | None:
        """The ``/healthz`` check: None while every loop is alive, otherwise which one crashed
        or is stuck. ``at`` is a ``time.monotonic()`` instant (default: now)."""
        return self._liveness.check(at)

    # --- the whole process ------------------------------------------------------------

    async def run(self) -> None:
        # The whole budget of a worker's connections is tickwork.db.budget's.
        self._pool = connections.async_pool(
            self.settings.database_url,
            min_size=budget.WORKER_POOL_MIN,
            max_size=budget.WORKER_POOL,
        )
        await self._pool.open(wait=True, timeout=15)
        self._watch.start()
        try:
            await self.check_budget()
            await self._register()
            logs.CURRENT_WORKER.set(self.name)  # the tasks started below inherit it
            tasks = [(kind, task.rule) for kind, task in self.app.registry.items()]
            await asyncio.to_thread(task_rules.write, self.settings.database_url, tasks, self.name)
            self._heartbeat.start()
            slots = [
                asyncio.create_task(self._slot(), name=f"slot-{i}")
                for i in range(self.settings.concurrency)
            ]
            completer = asyncio.create_task(self.outcomes.completer(), name="completer")
            background: list[asyncio.Task[None]] = [
                asyncio.create_task(coro, name=name)
                for name, coro in (
                    ("claimer", self._claimer()),
                    ("listener", self._listener()),
                    ("maintenance", self._maintenance()),
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
            self._threads.shutdown(wait=False, cancel_futures=True)
            await self._pool.close()

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
        """Log the connection budget once, before registering: the live fleet's connections
        and this worker's against the server's ``max_connections`` less its reserved slots
        (:func:`tickwork.db.budget.report`: a warning when tight, an error when over, and the
        worker starts all the same). Not compared behind a transaction pooler (None), nor when
        it cannot be read (None, with a warning)."""
        if self.settings.pooler == "transaction":
            budget.report_pooled(self.footprint, log, worker=self.name)
            return None
        try:
            async with self.pool.connection() as conn:
                found = await server.abudget(conn, self.footprint, self.clock.now())
        except Exception as exc:
            log.warning(
                "connection budget not checked: %s: %s",
                type(exc).__name__,
                " ".join(str(exc).split()) or "?",
                extra=fields(action="connection_budget", worker=self.name),
            )
            return None
        return budget.report(found, log, worker=self.name)

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
        self.name = self.outcomes.name = self._watch.worker = name

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
        self._interrupt_handed_back()
        for _ in slots:
            self._buffer.put_nowait(None)
        _, late = await asyncio.wait(slots, timeout=self.settings.shutdown_grace_seconds)
        if late:
            log.warning(
                "grace period over: interrupting running jobs",
                extra=fields(action="jobs_interrupted", count=self.running_jobs),
            )
            for slot in self._held.running():
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
        unstarted: list[Job] = []
        while not self._buffer.empty():
            job = self._buffer.get_nowait()
            if job is not None:
                unstarted.append(job)
                self._held.forget(job.id)
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

    def _interrupt_handed_back(self) -> None:
        """Interrupt the running tasks whose jobs are handed back at shutdown (their work goes
        on outside the worker); their slots hand the jobs back."""
        for held in self._held:
            task = self.app.registry.get(held.job.kind)
            if held.slot is None or held.cancelling or task is None:
                continue  # not running, or stopping already (a cancel request)
            if task.hand_back_on_shutdown:
                held.slot.cancel()

    async def _hand_back_running(self, job: Job) -> None:
        async def write() -> set[JobId]:
            async with self.pool.connection() as conn:
                return await store.arun(conn, jobs_db.hand_back_jobs([job], self.clock.now()))

        returned, _ = await self.outcomes.persist("handing back a running job", write)
        self._held.forget(job.id)
        log.info(
            "handed back at shutdown; a later attempt takes over its work"
            if returned
            else "not handed back: the job changed elsewhere",
            extra=job_fields("job_handed_back", job, worker=self.name),
        )

    # --- claiming ----------------------------------------------------------------------

    async def claim_once(self, limit: int) -> list[Job]:
        """One claim statement; the jobs go to the buffer for the slots."""
        try:
            now = self.clock.now()
            claim = jobs_db.claim_jobs(
                self.name,
                self.queues,
                self._max_attempts,
                limit,
                self.settings.lease_seconds,
                now,
                incarnation=self.incarnation,
            )
            async with self.pool.connection() as conn:
                if self._rules.due():
                    async with conn.transaction():
                        rules = jobs_db.lock_claim_rules(self.queues, self.kinds, now)
                        looked = await store.arun(conn, rules)
                        self._rules.looked(
                            looked.applying, looked.room_in_seconds, looked.contended
                        )
                        jobs = await store.arun(conn, claim)
                else:
                    jobs = await store.arun(conn, claim)
        except connections.UniqueViolation:
            # Two workers raced for the same concurrency key; the index refused the second.
            log.debug(
                "concurrency key race lost; claiming again",
                extra=fields(action="claim_race", worker=self.name),
            )
            return []
        for job in jobs:
            self._held.hold(job)
            self._buffer.put_nowait(job)
        if self.meters.enabled:
            self._count_claims(jobs)
        return jobs

    def _count_claims(self, jobs: list[Job]) -> None:
        """Claims, and queue latency: run_at to the claim (both on the database's clock)."""
        latencies: dict[metrics.JobMeter, list[float]] = {}
        for job in jobs:
            if job.started_at is not None:
                latency = (job.started_at - job.run_at).total_seconds()
                latencies.setdefault(self.meters.of(job), []).append(latency)
        for meter, values in latencies.items():
            meter.claimed.inc(len(values))
            meter.latency.observe_many(values)

    async def _claimer(self) -> None:
        if not self.kinds:
            return  # a worker that only fires schedules claims nothing
        outage = connections.Outage("claiming jobs", log, "claim_failed")
        while True:
            capacity = self.settings.concurrency + self.jobs_ahead()
            low_water = max(1, min(self.settings.claim_batch, capacity // 2))
            # Successes waiting for their batched write take no room (the claim overlaps the
            # write), up to as many again as the capacity: a stalled write stops the claims.
            room = min(capacity - self._held.unfinished, 2 * capacity - len(self._held))
            if room < low_water and not (room > 0 and self._buffer.empty()):
                self._room.clear()
                await self._room.wait()
                continue
            self._wake.clear()
            asked = min(room, self.settings.claim_batch)
            try:
                if outage.attempts:  # the failed claim may have committed: adopt what it took
                    await self._adopt()
                began = time.perf_counter()
                got = await self.claim_once(asked)
                self.estimates.claimed(time.perf_counter() - began)
            except Exception as exc:
                await after_error(self.pool, exc, outage)
                continue
            outage.recovered()
            if not got:  # a short batch may have left a job behind a key it took: claim again
                await sleep(self._rules.idle_seconds(self.settings.poll_seconds), self._wake)
                if not self._held.unfinished:  # ran dry: the next jobs may be slow ones
                    self.estimates.idle()

    async def _adopt(self) -> None:
        async with self.pool.connection() as conn:
            jobs = await store.arun(conn, jobs_db.adopt_jobs(self.incarnation, self._held.ids()))
        for job in jobs:
            self._held.hold(job)
            self._buffer.put_nowait(job)
        if jobs:
            log.info(
                "adopted jobs a lost claim answer left running under this process",
                extra=fields(action="jobs_adopted", count=len(jobs), worker=self.name),
            )

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

    async def _listener(self) -> None:
        """LISTEN for new jobs, cancellations and schedule changes; polling and the heartbeat
        cover the time this is down, and all the time behind a transaction pooler without
        ``listen_url``."""
        url = self.settings.notifications_url
        if not url:
            log.info(
                "no notifications (pooler %s, no listen URL): polling every %ss",
                self.settings.pooler,
                self.settings.poll_seconds,
                extra=fields(action="listener_off"),
            )
            return
        outage = connections.Outage("listening for notifications", log, "listener_lost")
        while True:
            try:
                channels = ["tickwork_jobs", CANCEL_CHANNEL]
                if self.settings.namespaces:
                    channels.append(firing.CHANNEL)
                async for channel, payload in connections.notifications(url, channels):
                    if channel == firing.CHANNEL:
                        if payload in self.settings.namespaces:
                            self._schedules_wake.set()
                    elif channel == CANCEL_CHANNEL:
                        if payload.isdigit() and JobId(int(payload)) in self._held:
                            self._heartbeat.wake()  # it learns which jobs were asked to stop
                    elif channel == "":  # listening now: look for anything missed meanwhile
                        outage.recovered()
                        self._wake.set()
                        self._schedules_wake.set()
                    elif payload in self.queues:
                        self._wake.set()
            except Exception as exc:
                await sleep(max(outage.failed(exc), self.settings.poll_seconds))

    # --- running -----------------------------------------------------------------------

    async def _slot(self) -> None:
        turn = time.perf_counter()
        while True:
            job = await self._buffer.get()
            if job is None:
                return
            if self._held.lost(job.id):
                self._held.forget(job.id)
                continue
            began = time.perf_counter()
            try:
                await self._run_job(job)
            except Exception as exc:
                # Not written (a lost connection is retried until a shutdown's grace is over):
                # the lease runs out and the job runs again.
                log.error(
                    "could not record the outcome: %s",
                    exc,
                    exc_info=exc,
                    extra=job_fields("outcome_failed", job),
                )
                self._held.forget(job.id)
            ended = time.perf_counter()
            self.estimates.ran(ended - began)
            # Let the claimer, the completer and the other slots have their turn every
            # millisecond: a task that never awaits (a no-op) would otherwise run the whole
            # buffer before the next claim is even sent, and claims would never overlap work.
            if ended - turn >= _TURN_SECONDS:
                await asyncio.sleep(0)
                turn = time.perf_counter()

    async def _run_job(self, job: Job) -> None:
        task = self.app.registry.get(job.kind)
        assert task is not None, "claimed only registered kinds"
        held = self._held.get(job.id)
        assert held is not None, "held from its claim until its outcome"
        if held.cancelling:  # asked to stop before it started
            await self.outcomes.cancelled(job)
            return
        # The job runs inside this slot's own task (no task per job): to interrupt it, the
        # heartbeat or the shutdown cancels the slot while it is registered here, which is
        # only while it awaits inside execute().
        slot = asyncio.current_task()
        assert slot is not None
        held.slot = slot
        started = time.perf_counter()
        try:
            outcome: executor.Outcome = await executor.execute(job, task, self._threads)
            if self.meters.enabled:
                elapsed = time.perf_counter() - started
                self.meters.of(job).duration.observe(elapsed)
        except asyncio.CancelledError:
            slot.uncancel()
            if held.lost:
                self._held.forget(job.id)
                return
            if self._stopping.is_set() and not held.cancelling:
                if task.hand_back_on_shutdown:  # its work goes on: the next attempt adopts it
                    await self._hand_back_running(job)
                else:  # the grace ran out: not the job failing
                    await self.outcomes.interrupted(job)
                return
            outcome = executor.Failed(_CANCELLED_ERROR)
        finally:
            held.slot = None
        if held.lost:
            log.info(
                "job was cancelled or taken over while running; outcome dropped",
                extra=job_fields("outcome_dropped", job),
            )
            self._held.forget(job.id)
            return
        if held.cancelling:  # whatever the task's outcome: it was asked to stop
            await self.outcomes.cancelled(job)
            return
        if isinstance(outcome, executor.Succeeded):
            if job.schedule is not None and outcome.result is not None:
                self._carry(held, outcome.result)
            self._held.finish(job.id)
            self.outcomes.succeeded(job)
        else:
            await self.outcomes.failed(job, outcome)
            self._held.forget(job.id)

    def _carry(self, held: Held, result: Any) -> None:
        job = held.job
        try:
            store.to_json("return value", result)
        except InvalidInput as exc:
            log.warning(
                "return value not carried to the schedule: %s",
                exc,
                extra=fields(action="state_not_carried", job_id=job.id, kind=job.kind),
            )
            return
        held.result = result

    # --- leases and maintenance --------------------------------------------------------

    async def heartbeat_once(self) -> None:
        """One heartbeat now, as the heartbeat thread runs it (in a thread, on the heartbeat's
        connection), its findings applied."""
        self._found(await asyncio.to_thread(self._heartbeat.run_once))

    def _found(self, beat: Beat) -> None:
        """A heartbeat's findings, on the loop: drop the jobs that are no longer ours, stop
        the ones asked to stop. A record dropped or replaced meanwhile is left alone, and so is
        a job whose task has returned: its outcome's write is fenced by version."""
        for held in beat.held:
            if held.finished or self._held.get(held.job.id) is not held:
                continue
            if held.job.id not in beat.kept:
                self._lose(held)
            elif beat.kept[held.job.id] and not held.cancelling:
                self._stop_job(held)

    def _lose(self, held: Held) -> None:
        log.info(
            "job no longer ours (recovered elsewhere)",
            extra=job_fields("job_lost", held.job, worker=self.name),
        )
        held.lost = True
        if held.slot is not None:
            held.slot.cancel()

    def _stop_job(self, held: Held) -> None:
        """``job`` was asked to stop: cancel its async task (a sync one cannot be stopped and
        runs on); the slot records it cancelled when the task has returned."""
        job = held.job
        log.info("job asked to stop", extra=job_fields("cancel_requested", job, worker=self.name))
        held.cancelling = True
        task = self.app.registry.get(job.kind)
        if held.slot is not None and task is not None and task.is_async:
            held.slot.cancel(CANCEL_REQUESTED)

    async def maintain_once(self) -> None:
        """Run each service of :attr:`services`: a shared one when this worker manages to
        claim its duty row for the interval, the others every time."""
        async with self.pool.connection() as conn:
            for service in self.services:
                if service.shared:
                    async with conn.transaction():
                        mine = await store.arun(
                            conn,
                            duties_db.claim_duty(
                                service.name, self.name, service.interval, self.clock.now()
                            ),
                        )
                    if not mine:
                        continue
                await service.run_once(conn, self.clock.now())

    async def _maintenance(self) -> None:
        outage = connections.Outage("maintenance", log, "maintenance_failed")
        while True:
            self._liveness.beat("maintenance", self.settings.maintenance_seconds)
            delay = self.settings.maintenance_seconds
            try:
                await self.maintain_once()
            except Exception as exc:
                delay = min(outage.failed(exc), delay)
                await after_error(self.pool, exc)
            else:
                outage.recovered()
            await sleep(delay)
