"""The firing loop of a worker: a pass, then sleep until the earliest next run of its
namespaces (warming the definition cache meanwhile), or until a ``tickwork_schedules``
notification wakes it; the cap on its sleep covers a lost notification."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from tickwork.clock import Clock, sleep
from tickwork.db import connections, store
from tickwork.db import schedules as db
from tickwork.maintenance.firing.cache import warm
from tickwork.maintenance.firing.config import FireReport, FiringConfig
from tickwork.maintenance.firing.service import Firing

log = logging.getLogger(__package__)


async def loop(
    pool: connections.AsyncPool,
    firing: Firing,
    *,
    clock: Clock,
    wake: asyncio.Event,
    alive: Callable[[FiringConfig], None] = lambda config: None,
) -> None:
    """Run ``firing`` until cancelled: a pass, then sleep until the earliest next run of its
    namespaces (at most ``config.max_sleep``) or until ``wake`` is set. ``alive`` is called
    before each pass (the worker's liveness check watches it)."""
    namespaces, config = firing.namespaces, firing.config
    outage = connections.Outage(
        f"firing {','.join(namespaces)}", log, "firing_failed", most=config.error_sleep
    )
    warmed: datetime | None = None
    """Every spec due until then is parsed (None: warm from now): a notification (a sync may
    bring new specs) or an error starts over."""
    while True:
        alive(config)
        if wake.is_set():  # a sync may have brought new specs, or moved schedules back
            warmed = None
            firing.floors.forget()
        wake.clear()
        try:
            async with pool.connection() as conn:
                report = await firing.run_once(conn, clock.now())
                alarm = await store.arun(conn, db.next_due(namespaces, clock.now()))
                delay = _delay(report, alarm, config)
                if delay >= config.warm_idle:
                    woke_at = time.monotonic() + delay
                    horizon = alarm.now + timedelta(seconds=delay + config.max_sleep)
                    done = await warm(
                        conn,
                        namespaces,
                        firing.cache,
                        horizon,
                        woke_at - config.busy_sleep,
                        after=warmed,
                    )
                    warmed = done.until
                    delay = max(woke_at - time.monotonic(), 0.0)
        except Exception as exc:  # any error: logged once per outage, retried with backoff
            warmed = None
            delay = outage.failed(exc, namespace=",".join(namespaces))
            if isinstance(exc, connections.ConnectionLost):
                with contextlib.suppress(Exception):
                    await connections.discard_broken(pool)
        else:
            outage.recovered()
        await sleep(delay, wake)


def _delay(report: FireReport, alarm: db.NextDue, config: FiringConfig) -> float:
    if report.deferred:
        return config.busy_sleep
    if alarm.next_run_at is None:
        return config.max_sleep
    seconds = (alarm.next_run_at - alarm.now).total_seconds()
    if seconds <= 0:
        # Due, yet not ours: another worker holds it right now.
        return config.busy_sleep
    return min(seconds, config.max_sleep)
