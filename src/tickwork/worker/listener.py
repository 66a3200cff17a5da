"""The worker's LISTEN connection: new jobs on its queues wake the claimer, a cancellation of a
job it holds wakes the heartbeat (which learns which jobs were asked to stop), a schedule
change in a namespace it fires wakes the firing loop. Polling and the heartbeat cover the time
it is down, and all the time behind a transaction pooler without ``listen_url``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from tickwork.clock import sleep
from tickwork.db import connections
from tickwork.logs import fields
from tickwork.maintenance import firing
from tickwork.model import JobId
from tickwork.settings import WorkerSettings
from tickwork.worker.held import HeldJobs

log = logging.getLogger(__name__)

JOBS_CHANNEL = "tickwork_jobs"
"""Notified with a queue's name when a job becomes available in it."""
CANCEL_CHANNEL = "tickwork_cancel"
"""Notified with a job's id when it is asked to stop (trigger jobs_notify_cancel_requested)."""


class Listener:
    def __init__(
        self,
        *,
        settings: WorkerSettings,
        queues: list[str],
        held: HeldJobs,
        jobs: asyncio.Event,
        schedules: asyncio.Event,
        cancels: Callable[[], None],
    ) -> None:
        self._settings = settings
        self._queues = queues
        self._held = held
        self._jobs = jobs
        """Set when a job may have become available in one of the queues (or after a gap)."""
        self._schedules = schedules
        """Set when a namespace this worker fires changed (or after a gap)."""
        self._cancels = cancels
        """Called when a held job is asked to stop."""

    async def run(self) -> None:
        settings = self._settings
        url = settings.notifications_url
        if not url:
            log.info(
                "no notifications (pooler %s, no listen URL): polling every %ss",
                settings.pooler,
                settings.poll_seconds,
                extra=fields(action="listener_off"),
            )
            return
        outage = connections.Outage("listening for notifications", log, "listener_lost")
        channels = [JOBS_CHANNEL, CANCEL_CHANNEL]
        if settings.namespaces:
            channels.append(firing.CHANNEL)
        while True:
            try:
                async for channel, payload in connections.notifications(url, channels):
                    if channel == "":  # listening now: look for anything missed meanwhile
                        outage.recovered()
                        self._jobs.set()
                        self._schedules.set()
                    else:
                        self._heard(channel, payload)
            except Exception as exc:
                await sleep(max(outage.failed(exc), settings.poll_seconds))

    def _heard(self, channel: str, payload: str) -> None:
        if channel == firing.CHANNEL:
            if payload in self._settings.namespaces:
                self._schedules.set()
        elif channel == CANCEL_CHANNEL:
            if payload.isdigit() and JobId(int(payload)) in self._held:
                self._cancels()
        elif payload in self._queues:
            self._jobs.set()
