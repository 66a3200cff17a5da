"""The worker's heartbeat: a thread of its own, on a database connection of its own, that
every ``--heartbeat-seconds`` extends the leases of the jobs the worker holds and refreshes
the worker's row. It does not depend on the event loop that runs the tasks: an ``async def``
task that blocks the loop (CPU-bound code, a sync call) for longer than the lease keeps its
lease, and no other worker runs its job again meanwhile.

What a heartbeat learns — the jobs asked to stop, the jobs no longer ours (recovered
elsewhere) — it hands to the loop (``call_soon_threadsafe``), where it takes effect once the
loop is free: only the leases must not wait. A cancel notification wakes it at once
(:meth:`Heartbeat.wake`). A failed heartbeat is retried soon, with backoff, on a new
connection (logged once per outage, as the loops do), and never taken for lost leases: only
the database says a job is no longer ours. Each round beats the worker's liveness, so
``/healthz`` tells a stuck heartbeat thread (``loop heartbeat stuck``).

:meth:`Heartbeat.run_once` is one heartbeat, callable from any thread (tests call it through
``Worker.heartbeat_once``); the thread runs it every interval.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from uuid import UUID

from tickwork.clock import Clock
from tickwork.db import connections, store
from tickwork.db import jobs as jobs_db
from tickwork.db import workers as workers_db
from tickwork.logs import fields
from tickwork.model import JobId
from tickwork.worker.held import Held, HeldJobs
from tickwork.worker.liveness import Liveness

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_SECONDS = 10
"""How long the heartbeat waits for a new connection (unless the URL sets ``connect_timeout``)."""
STOP_SECONDS = 5.0
"""How long :meth:`Heartbeat.stop` waits for the heartbeat under way before it cancels its
statement (one blocked by a lock), and then again before it leaves the thread behind."""


@dataclass(frozen=True)
class HeartbeatConfig:
    url: str
    """The database (the worker's ``--database-url``; a transaction-mode pooler is fine)."""
    incarnation: UUID
    """The worker process whose leases are extended and whose row is refreshed."""
    lease_seconds: float
    """Each heartbeat extends the leases to this long from the database's now."""
    interval: float
    """Seconds between heartbeats."""


@dataclass(frozen=True)
class Beat:
    """What one heartbeat found: the records it extended the leases of, and for each job still
    ours whether it was asked to stop (a record missing from ``kept`` is no longer ours)."""

    held: list[Held]
    kept: dict[JobId, bool]


class Heartbeat:
    """The heartbeat thread: :meth:`start` on the worker's loop, :meth:`stop` (blocking) when
    the last outcome is written. ``found`` runs on the loop with each heartbeat's findings."""

    def __init__(
        self,
        config: HeartbeatConfig,
        *,
        clock: Clock,
        held: HeldJobs,
        liveness: Liveness,
        found: Callable[[Beat], None],
    ) -> None:
        self.config = config
        self._clock = clock
        self._held = held
        self._liveness = liveness
        self._found = found
        self._conn: connections.Connection | None = None
        self._lock = threading.Lock()
        """One heartbeat at a time on the connection (the thread's, or a test's)."""
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> Beat:
        """Extend the leases of every job held now and refresh the worker's row, in one
        transaction on the heartbeat's connection (opened when there is none)."""
        with self._lock:
            held = self._held.snapshot()
            now = self._clock.now()
            try:
                conn = self._conn or self._connect()
                with conn.transaction():
                    extend = jobs_db.extend_leases(
                        [h.job for h in held],
                        self.config.lease_seconds,
                        now,
                        incarnation=self.config.incarnation,
                    )
                    kept = store.run(conn, extend)
                    store.run(conn, workers_db.touch_worker(self.config.incarnation, now))
            except Exception:
                self._disconnect()  # whatever broke, the next attempt starts on a new one
                raise
        return Beat(held, kept)

    def wake(self) -> None:
        """Beat now (thread-safe): a job held may have been asked to stop."""
        self._wake.set()

    def start(self) -> None:
        """Run the heartbeat in its thread, handing findings to the running loop."""
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()  # its log records name the worker
        self._thread = threading.Thread(
            target=context.run,
            args=(self._run, loop),
            name=f"tickwork-heartbeat-{self.config.incarnation.hex[:8]}",
            daemon=True,  # a heartbeat stuck in the network never keeps the process alive
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread (after its current heartbeat) and close the connection."""
        self._stopped.set()
        self._wake.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(STOP_SECONDS)
            if thread.is_alive():  # a statement stuck behind a lock, or the network
                self._cancel()
                thread.join(STOP_SECONDS)
            if thread.is_alive():  # a daemon thread: it does not keep the process alive
                log.warning(
                    "the heartbeat did not stop; leaving its thread behind",
                    extra=fields(action="heartbeat_abandoned"),
                )
                return
        with self._lock:
            self._disconnect()

    def _run(self, loop: asyncio.AbstractEventLoop) -> None:
        outage = connections.Outage("heartbeat", log, "heartbeat_failed")
        interval = self.config.interval
        delay = interval
        while True:
            self._liveness.beat("heartbeat", interval)
            self._wake.wait(delay)
            self._wake.clear()
            if self._stopped.is_set():
                return
            try:
                beat = self.run_once()
            except Exception as exc:
                if self._stopped.is_set():
                    return  # cancelled by stop(): a failure of no interest
                delay = min(outage.failed(exc), interval)
                continue
            outage.recovered()
            delay = interval
            try:
                loop.call_soon_threadsafe(self._found, beat)
            except RuntimeError:  # the loop is closed: the worker is gone
                return

    def _cancel(self) -> None:
        conn = self._conn
        if conn is None:
            return
        try:
            conn.cancel_safe(timeout=STOP_SECONDS)
        except Exception as exc:  # the server is gone too: the thread ends with the connection
            log.debug("cancelling the heartbeat's statement failed: %s", exc)

    def _connect(self) -> connections.Connection:
        self._conn = connections.connect(
            self.config.url, autocommit=True, timeout=CONNECT_TIMEOUT_SECONDS
        )
        return self._conn

    def _disconnect(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            try:
                conn.close()
            except Exception as exc:  # closing a broken connection: nothing to do
                log.debug("closing the heartbeat's connection failed: %s", exc)
