"""Each worker's share of the namespaces it fires, so that workers racing through a
backlog of the same namespaces claim apart instead of walking past each other's locked rows.

The namespaces offered by the same live workers (this one always counted) are dealt out in
name order, one each in turn, to those workers in name order: every worker that sees the
same fleet deals the same hands. While a worker's claims come back full (it has a backlog of
its own share), the others' schedules wait: it claims them only once they are ``wait``
seconds overdue. As soon as a claim comes back short, the next takes any due schedule, so an
idle worker helps the busy ones and fires a stopped worker's share at once. A worker that
stopped delays its share by ``wait`` at most, and only while the others are busy with their
own, until they see it gone (``worker_ttl_seconds``) and deal again. This is a preference and
nothing more: the claim's SKIP LOCKED keeps workers apart, and workers that see different
fleets for a moment still fire each occurrence once.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime

from tickwork.db import connections, store
from tickwork.db import workers as workers_db


def waits(
    me: str, namespaces: Sequence[str], live: Iterable[workers_db.LiveWorker], wait: float
) -> tuple[float, ...]:
    """Per namespace of ``namespaces``: 0 when it is ``me``'s share among the ``live``
    workers, else ``wait`` (seconds a due schedule waits before ``me`` claims it while it
    has its own share to fire)."""
    offering = {ns: {me} for ns in namespaces}
    for worker in live:
        for ns in worker.namespaces:
            if ns in offering:
                offering[ns].add(worker.name)
    groups: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for ns in sorted(offering):
        groups[tuple(sorted(offering[ns]))].append(ns)
    mine = {
        ns
        for workers, group in groups.items()
        for i, ns in enumerate(group)
        if workers[i % len(workers)] == me
    }
    return tuple(0.0 if ns in mine else wait for ns in namespaces)


class Shares:
    """A worker's waits per namespace (:func:`waits`), the live workers read again at most
    every ``refresh`` seconds."""

    def __init__(
        self, me: str, namespaces: Sequence[str], *, ttl: float, wait: float, refresh: float
    ) -> None:
        self.me, self.namespaces = me, tuple(namespaces)
        self.ttl, self.wait, self.refresh = ttl, wait, refresh
        self.waits = tuple(0.0 for _ in self.namespaces)
        self._read_at: float | None = None

    async def update(
        self, conn: connections.AsyncConnection, now: datetime | None
    ) -> tuple[float, ...]:
        """The waits, the live workers read again when ``refresh`` seconds have passed."""
        if self._read_at is None or time.monotonic() - self._read_at >= self.refresh:
            live = await store.arun(conn, workers_db.live_workers(self.ttl, now))
            self.waits = waits(self.me, self.namespaces, live, self.wait)
            self._read_at = time.monotonic()
        return self.waits
