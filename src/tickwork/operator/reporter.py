"""The status loop: one per operator, not one timer per object.

After every refresh of the status board (every ``status_interval`` seconds, and right after
each sync round; the board reads all rows in a few queries, whatever the number of objects),
one round computes every object's status from what the board read and patches only the objects
whose status changed, ``status_concurrency`` requests at a time. A round also answers run-now
tokens that had to wait, and posts the Events of status transitions.

Objects come from kopf's index (:class:`Shown`: the entry and the body as last seen). A status
patch reaches the index only when its watch event comes back; until then (at most
:data:`SETTLE_SECONDS`) the object keeps the version it had before the patch and the next
rounds leave it alone, so a slow watch never makes a round patch twice or post an Event twice.

Events are posted with :func:`kopf.event`, which needs kopf's context of an object handler:
:meth:`Reporter.capture` keeps it from the first one, and rounds run in it.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import kopf

from tickwork import metrics
from tickwork.logs import fields
from tickwork.operator.desired import Entry, ObjectKey, entry_of
from tickwork.operator.kube import StatusPatchFailed, StatusWriter

log = logging.getLogger(__name__)

SETTLE_SECONDS = 30.0
"""How long rounds leave an object alone after patching it, unless its watch event (a new
resourceVersion) comes back sooner."""


@dataclass(frozen=True)
class Shown:
    """One object as kopf's index keeps it."""

    entry: Entry
    body: kopf.Body

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> Shown:
        """``body`` as it is now (kopf's next event brings a new one)."""
        return cls(entry_of(body), kopf.Body(cast(kopf.RawBody, dict(body))))

    @property
    def status(self) -> dict[str, Any]:
        status = self.body.get("status")
        return dict(status) if isinstance(status, Mapping) else {}

    @property
    def version(self) -> str | None:
        metadata = self.body.get("metadata")
        return metadata.get("resourceVersion") if isinstance(metadata, Mapping) else None


Report = Callable[[Shown], Awaitable[dict[str, Any]]]
"""The status patch of one object (empty: nothing changed), posting its Events."""


class Reporter:
    def __init__(
        self,
        objects: Callable[[], Iterable[Shown]],
        report: Report,
        writer: StatusWriter,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.objects = objects
        self.report = report
        self.writer = writer
        self.monotonic = monotonic
        self.context: contextvars.Context | None = None
        self.rounds = 0
        self.patched = 0
        """Status patches made (for the benchmark)."""
        self._wake = asyncio.Event()
        self._settling: dict[ObjectKey, tuple[str | None, str | None, float]] = {}
        """Per object patched: (uid, resourceVersion before the patch, until when)."""

    def capture(self) -> None:
        """Called by an object handler: keep kopf's context for posting Events."""
        if self.context is None:
            self.context = contextvars.copy_context()

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                if self.context is not None:  # else no object was seen yet
                    await asyncio.create_task(self.round(), context=self.context)
        finally:
            await self.writer.close()

    async def round(self) -> int:
        """Patch every object whose status changed; returns how many patches were made."""
        self.rounds += 1
        now = self.monotonic()
        changed: list[tuple[Shown, dict[str, Any]]] = []
        for shown in list(self.objects()):
            if shown.entry.deleting or self._settles(shown, now):
                continue
            patch = await self.report(shown)
            if patch:
                changed.append((shown, patch))
        queue = iter(changed)
        failures: list[str] = []

        async def patcher() -> None:
            for shown, patch in queue:
                error = await self._patch(shown, patch)
                if error is not None:
                    failures.append(error)

        await asyncio.gather(
            *(patcher() for _ in range(min(len(changed), self.writer.concurrency)))
        )
        if failures:
            metrics.OPERATOR_ERRORS.labels("status").inc(len(failures))
            log.warning(
                "%d status patches failed (tried again next round), the first: %s",
                len(failures),
                failures[0],
                extra=fields(action="status"),
            )
        return len(changed) - len(failures)

    def _settles(self, shown: Shown, now: float) -> bool:
        """Whether a patch of this object is still on its way back through the watch."""
        settling = self._settling.get(shown.entry.key)
        if settling is None:
            return False
        uid, version, until = settling
        if (uid, version) == (shown.entry.uid, shown.version) and now < until:
            return True
        del self._settling[shown.entry.key]
        return False

    async def _patch(self, shown: Shown, patch: dict[str, Any]) -> str | None:
        namespace, name = shown.entry.key
        try:
            after = await self.writer.patch(namespace, name, patch)
        except StatusPatchFailed as error:
            return f"{namespace}/{name}: {error}"
        if after is None:
            return None  # gone: its deletion is on its way through the watch
        self.patched += 1
        if (after.get("metadata") or {}).get("resourceVersion") != shown.version:
            until = self.monotonic() + SETTLE_SECONDS
            self._settling[shown.entry.key] = (shown.entry.uid, shown.version, until)
        return None

    def forget(self, key: ObjectKey) -> None:
        """The object is gone."""
        self._settling.pop(key, None)
