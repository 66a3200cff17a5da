"""The status loop: one per operator, not one timer per object.

After every refresh of the status board (every ``status_interval`` seconds, and right after
each sync round; the board reads all rows in a few queries, whatever the number of objects),
one round computes every object's status from what the board read and patches only the objects
whose status changed, ``status_concurrency`` requests at a time. A round also answers run-now
tokens that had to wait, and posts the Events of status transitions.

Objects come from kopf's index (:class:`Shown`: the entry and the body as last seen). A status
patch reaches the index only when its watch event comes back (after the events of kopf's own
earlier patches, when kopf is busy); until the index shows the patch (at most
:data:`SETTLE_SECONDS`), rounds take the status the index shows with the patch merged in, so a
slow watch never makes a round patch twice or post an Event twice, and a busy operator does not
feed its own backlog.

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

SETTLE_SECONDS = 60.0
"""Longest time a patch is taken as applied while the index does not show it yet."""


@dataclass(frozen=True)
class Shown:
    """One object as kopf's index keeps it."""

    entry: Entry
    body: kopf.Body
    indexed_at: float = 0.0
    """When it was indexed (monotonic time; the operator's view drops an entry indexed before
    a listing that no longer holds its object)."""

    @classmethod
    def of(cls, body: Mapping[str, Any], indexed_at: float = 0.0) -> Shown:
        """The object from kopf's body of one event (each event brings a new one, so it is
        kept as it is), or from a raw body."""
        view = body if isinstance(body, kopf.Body) else kopf.Body(cast(kopf.RawBody, body))
        return cls(entry_of(view), view, indexed_at)

    @property
    def status(self) -> dict[str, Any]:
        status = self.body.get("status")
        return dict(status) if isinstance(status, Mapping) else {}

    @property
    def version(self) -> str | None:
        metadata = self.body.get("metadata")
        return metadata.get("resourceVersion") if isinstance(metadata, Mapping) else None


Report = Callable[[Shown, dict[str, Any]], Awaitable[dict[str, Any]]]
"""The status patch of one object given its current status (empty: nothing changed), posting
its Events."""


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
        self._written: dict[ObjectKey, tuple[str | None, dict[str, Any], float]] = {}
        """Per object patched whose watch event has not come back: (uid, the patches made
        since, merged, until when they are taken as applied)."""

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
        changed: list[tuple[Shown, dict[str, Any]]] = []
        for shown in list(self.objects()):
            if shown.entry.deleting:
                continue
            current = self._current(shown)
            patch = await self.report(shown, current)
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

    def _current(self, shown: Shown) -> dict[str, Any]:
        """The object's status: the index's, with the patches it does not show yet."""
        status = shown.status
        written = self._written.get(shown.entry.key)
        if written is None:
            return status
        uid, patch, until = written
        if uid == shown.entry.uid and self.monotonic() < until:
            patched = merged(status, patch)
            if patched != status:
                return patched
        del self._written[shown.entry.key]
        return status

    async def _patch(self, shown: Shown, patch: dict[str, Any]) -> str | None:
        namespace, name = shown.entry.key
        try:
            after = await self.writer.patch(namespace, name, patch)
        except StatusPatchFailed as error:
            return f"{namespace}/{name}: {error}"
        if after is None:
            return None  # gone: its deletion is on its way through the watch
        self.patched += 1
        key = shown.entry.key
        earlier = self._written.get(key)
        if earlier is not None and earlier[0] == shown.entry.uid:
            patch = composed(earlier[1], patch)
        self._written[key] = (shown.entry.uid, patch, self.monotonic() + SETTLE_SECONDS)
        return None

    def forget(self, key: ObjectKey) -> None:
        """The object is gone."""
        self._written.pop(key, None)


def merged(current: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """``current`` with the JSON merge patch ``patch`` applied (RFC 7386: None removes)."""
    result = dict(current)
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, Mapping):
            before = result.get(key)
            result[key] = merged(before if isinstance(before, Mapping) else {}, value)
        else:
            result[key] = value
    return result


def composed(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Any]:
    """One merge patch doing what ``first`` then ``second`` do."""
    result = dict(first)
    for key, value in second.items():
        before = result.get(key)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            result[key] = composed(before, value)
        else:
            result[key] = value
    return result
