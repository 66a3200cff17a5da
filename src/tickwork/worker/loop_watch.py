"""The worker's watch over its own event loop, from a thread of its own. Every
:data:`PROBE_SECONDS` it hands the loop a callback and measures how late the loop runs it:
the loop's lag, exported as ``tickwork_worker_loop_lag_seconds``.

A callback still waiting after :func:`threshold` means the loop is blocked now — by an
``async def`` task that does not await (CPU-bound code, a sync call such as ``time.sleep`` or
a blocking client). While it is, one WARNING (``action=loop_blocked``) names what blocks it:
the job whose slot the loop is stepping (id, kind, attempt), or else the asyncio task, and
the innermost lines of code the loop's thread is on; once the loop runs again, one INFO line
(``action=loop_unblocked``) says for how long. The leases are safe meanwhile (the heartbeat
has a thread of its own), but nothing else happens on the loop: no claims, outcomes,
cancellations or schedule firing, and no ``/healthz`` answer (the probe fails after its
timeout). ``asyncio.current_task(loop)`` tells, from any thread, which task a loop steps;
``sys._current_frames()`` where the loop's thread is.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tickwork import metrics
from tickwork.logs import fields
from tickwork.model import Job

log = logging.getLogger(__name__)

PROBE_SECONDS = 0.5
"""How often the loop is probed."""
MIN_STALL_SECONDS = 1.0
"""The shortest stall reported (see :func:`threshold`)."""
STACK_FRAMES = 3
"""How many of the loop thread's innermost frames a stall's warning shows."""

JobOf = Callable[[asyncio.Task[Any]], Job | None]
"""The job a task (a slot) is running now, if any; called from the watch's thread."""


def threshold(lease_seconds: float) -> float:
    """A loop blocked this long is reported: a quarter of the lease, at least a second."""
    return max(MIN_STALL_SECONDS, lease_seconds / 4)


class LoopWatch:
    """Probe the loop :meth:`start` is called on until :meth:`stop`; report each stall longer
    than ``stall_seconds``, naming the job ``job_of`` says its task runs."""

    def __init__(
        self, *, stall_seconds: float, job_of: JobOf, worker: str, every: float = PROBE_SECONDS
    ) -> None:
        self.stall_seconds = stall_seconds
        self.every = every
        self._job_of = job_of
        self.worker = worker
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._thread = threading.Thread(
            target=contextvars.copy_context().run,
            args=(self._run,),
            name=f"tickwork-loop-watch-{self.worker}",
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop watching (from the loop: it is not blocked then, the last probe returns)."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def probe_once(self) -> float | None:
        """Hand the loop a callback, wait until it ran (reporting a stall on the way) and
        return how late it ran; None when the watch stopped or the loop closed meanwhile."""
        assert self._loop is not None, "started"
        ran = threading.Event()
        ran_at: list[float] = []

        def probe() -> None:
            ran_at.append(time.monotonic())
            ran.set()

        posted = time.monotonic()
        try:
            self._loop.call_soon_threadsafe(probe)
        except RuntimeError:  # the loop is closed
            return None
        blocked = not ran.wait(self.stall_seconds)
        if blocked:
            self._report_blocked()
            while not ran.wait(self.every):
                if self._stopped.is_set():
                    return None
        lag = ran_at[0] - posted
        metrics.LOOP_LAG.observe(lag)
        if blocked:
            log.info(
                "event loop free again after %.1fs",
                lag,
                extra=fields(action="loop_unblocked", worker=self.worker),
            )
        return lag

    def _run(self) -> None:
        while not self._stopped.wait(self.every):
            if self.probe_once() is None:
                return

    def _where(self) -> str:
        """The innermost frames of the loop's thread, innermost first."""
        frame = sys._current_frames().get(self._loop_thread)
        if frame is None:
            return "?"
        stack = reversed(traceback.extract_stack(frame, limit=STACK_FRAMES))
        return " < ".join(f"{Path(at.filename).name}:{at.lineno} ({at.name})" for at in stack)

    def _report_blocked(self) -> None:
        assert self._loop is not None
        task = asyncio.current_task(self._loop)
        job = self._job_of(task) if task is not None else None
        where = self._where()
        if job is not None:
            culprit = f"job {job.id} (kind {job.kind}, attempt {job.attempt})"
            extra = fields(
                action="loop_blocked",
                worker=self.worker,
                job_id=job.id,
                kind=job.kind,
                attempt=job.attempt,
            )
        else:
            culprit = f"task {task.get_name()}" if task is not None else "a callback"
            extra = fields(action="loop_blocked", worker=self.worker)
        log.warning(
            "event loop blocked for over %.1fs by %s at %s: an async task must await, not "
            "block (run blocking code in a sync task or asyncio.to_thread); the worker does "
            "nothing else meanwhile",
            self.stall_seconds,
            culprit,
            where,
            extra=extra,
        )
