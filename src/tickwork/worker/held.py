"""The jobs a worker holds, from their claim until their outcome is written or dropped: one
record per job (:class:`Held`) in one dict (:class:`HeldJobs`), dropped in one place
(:meth:`HeldJobs.forget`), and the line of claimed jobs waiting for a slot
(:meth:`HeldJobs.claimed`, :meth:`HeldJobs.next_job`). A job whose task has returned
(:meth:`HeldJobs.finish`) or that is dropped tells the claimer there is room again: a success
waiting for its batched write takes no room, so the next claim overlaps that write.

The records are changed on the event loop only; the heartbeat and the stall watch read them
from threads of their own, through :meth:`HeldJobs.snapshot`."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tickwork.logs import fields
from tickwork.model import Job, JobId
from tickwork.progress import Report


@dataclass
class Held:
    job: Job
    lost: bool = False
    """Its lease could not be extended (it was taken over elsewhere): its outcome is dropped."""
    cancelling: bool = False
    """Asked to stop: recorded cancelled once its task has returned."""
    slot: asyncio.Task[None] | None = None
    """The slot running its task, while it runs."""
    result: Any = None
    """A succeeded job's return value as kept (:func:`tickwork.results.keep`), written with its
    outcome; a schedule job's is also its schedule's carried state."""
    result_error: str | None = None
    """Why the value its task returned was not kept."""
    finished: bool = False
    """Its task has returned; its outcome is being written."""
    progress: Report | None = None
    """The latest progress its task reported (:mod:`tickwork.worker.progress`)."""
    progress_written: Report | None = None
    """The report last written: ``progress`` is pending while it is another."""


class HeldJobs:
    def __init__(self) -> None:
        self._held: dict[JobId, Held] = {}
        self.room = asyncio.Event()
        """Set whenever a job's task returns or its record is dropped: the claimer may claim."""
        self._waiting: asyncio.Queue[Job | None] = asyncio.Queue()
        """Claimed jobs no slot has taken yet; a None stops the slot that takes it."""
        self._finished = 0
        self._lock = threading.Lock()
        """Taken to add or drop a record, and by :meth:`snapshot` (other threads)."""

    def hold(self, job: Job) -> None:
        with self._lock:
            self._held[job.id] = Held(job)

    def claimed(self, job: Job) -> None:
        """Hold a claimed (or adopted) job and line it up for the next free slot."""
        self.hold(job)
        self._waiting.put_nowait(job)

    async def next_job(self) -> Job | None:
        """The next claimed job for a slot, or None: the slot stops (:meth:`stop_slots`)."""
        return await self._waiting.get()

    @property
    def none_waiting(self) -> bool:
        """No claimed job is waiting for a slot."""
        return self._waiting.empty()

    def unstarted(self) -> list[Job]:
        """Take every claimed job no slot has started, dropping their records (at shutdown:
        they are handed back)."""
        jobs: list[Job] = []
        while not self._waiting.empty():
            job = self._waiting.get_nowait()
            if job is not None:
                jobs.append(job)
                self.forget(job.id)
        return jobs

    def stop_slots(self, count: int) -> None:
        """Stop ``count`` slots, each once it has run the jobs lined up before."""
        for _ in range(count):
            self._waiting.put_nowait(None)

    def snapshot(self) -> list[Held]:
        """The records held now; safe to call from any thread."""
        with self._lock:
            return list(self._held.values())

    def get(self, job_id: JobId) -> Held | None:
        return self._held.get(job_id)

    def __contains__(self, job_id: JobId) -> bool:
        return job_id in self._held

    def __len__(self) -> int:
        return len(self._held)

    @property
    def unfinished(self) -> int:
        """Jobs held whose task has not returned: waiting for a slot, or running."""
        return len(self._held) - self._finished

    def __iter__(self) -> Iterator[Held]:
        return iter(list(self._held.values()))

    def ids(self) -> list[JobId]:
        return list(self._held)

    def lost(self, job_id: JobId) -> bool:
        held = self._held.get(job_id)
        return held is not None and held.lost

    def cancelling(self, job_id: JobId) -> bool:
        held = self._held.get(job_id)
        return held is not None and held.cancelling

    def running(self) -> list[asyncio.Task[None]]:
        """The slots running a held job's task now."""
        return [held.slot for held in self._held.values() if held.slot is not None]

    def running_on(self, slot: asyncio.Task[Any]) -> Job | None:
        """The job whose task ``slot`` runs now, if any; safe to call from any thread."""
        return next((held.job for held in self.snapshot() if held.slot is slot), None)

    def finish(self, job_id: JobId) -> None:
        """The job's task returned; its outcome is written later: there is room for another."""
        held = self._held.get(job_id)
        if held is not None and not held.finished:
            held.finished = True
            self._finished += 1
        self.room.set()

    def forget(self, job_id: JobId) -> None:
        """Drop the job's record, whatever became of it; there is room for another."""
        with self._lock:
            held = self._held.pop(job_id, None)
        if held is not None and held.finished:
            self._finished -= 1
        self.room.set()


def job_fields(action: str, job: Job, **more: Any) -> dict[str, Any]:
    """The log fields of a line about ``job``: ``action``, its id, kind and attempt, and
    ``more``."""
    return fields(action=action, job_id=job.id, kind=job.kind, attempt=job.attempt, **more)
