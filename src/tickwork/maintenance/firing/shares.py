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
from dataclasses import dataclass
from datetime import datetime

from tickwork.db import connections, store
from tickwork.db import workers as workers_db


def share(me: str, namespaces: Sequence[str], live: Iterable[workers_db.LiveWorker]) -> list[str]:
    """``me``'s share of ``namespaces`` among the ``live`` workers, in name order."""
    offering = {ns: {me} for ns in namespaces}
    for worker in live:
        for ns in worker.namespaces:
            if ns in offering:
                offering[ns].add(worker.name)
    groups: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for ns in sorted(offering):
        groups[tuple(sorted(offering[ns]))].append(ns)
    return sorted(
        ns
        for workers, group in groups.items()
        for i, ns in enumerate(group)
        if workers[i % len(workers)] == me
    )


def waits(
    me: str,
    namespaces: Sequence[str],
    live: Iterable[workers_db.LiveWorker],
    wait: float,
    part: tuple[int, int] = (0, 1),
) -> tuple[float, ...]:
    """Per namespace of ``namespaces``: 0 when it is in ``me``'s share among the ``live``
    workers, else ``wait`` (seconds a due schedule waits before ``me`` claims it while it
    has its own share to fire). ``part`` (index, parts): one of ``parts`` passes of ``me``,
    which deal its share among themselves the same way."""
    index, parts = part
    return _waiting(namespaces, share(me, namespaces, live)[index::parts], wait)


def _waiting(namespaces: Sequence[str], mine: Sequence[str], wait: float) -> tuple[float, ...]:
    own = set(mine)
    return tuple(0.0 if ns in own else wait for ns in namespaces)


@dataclass(frozen=True)
class Dealt:
    """A worker's waits per namespace: for a pass of its own (``whole``), and for each of the
    passes that fire a backlog at once (``parts``: its share dealt among them)."""

    whole: tuple[float, ...]
    parts: tuple[tuple[float, ...], ...]


class Shares:
    """A worker's waits per namespace (:func:`waits`), the live workers read again at most
    every ``refresh`` seconds; its share is dealt among at most ``parts`` passes."""

    def __init__(
        self,
        me: str,
        namespaces: Sequence[str],
        *,
        ttl: float,
        wait: float,
        refresh: float,
        parts: int = 1,
    ) -> None:
        self.me, self.namespaces, self.parts = me, tuple(namespaces), parts
        self.ttl, self.wait, self.refresh = ttl, wait, refresh
        nothing = tuple(0.0 for _ in self.namespaces)
        self.dealt = Dealt(nothing, (nothing,))
        self._read_at: float | None = None

    async def update(self, conn: connections.AsyncConnection, now: datetime | None) -> Dealt:
        """The waits, the live workers read again when ``refresh`` seconds have passed."""
        if self._read_at is None or time.monotonic() - self._read_at >= self.refresh:
            live = await store.arun(conn, workers_db.live_workers(self.ttl, now))
            mine = share(self.me, self.namespaces, live)
            parts = max(1, min(self.parts, len(mine)))
            self.dealt = Dealt(
                _waiting(self.namespaces, mine, self.wait),
                tuple(
                    _waiting(self.namespaces, mine[index::parts], self.wait)
                    for index in range(parts)
                ),
            )
            self._read_at = time.monotonic()
        return self.dealt
