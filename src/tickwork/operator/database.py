"""The operator's database calls, each run in a worker thread on a small pool of its own.

A pool (rather than the App's) so that an unreachable database fails a call within
``timeout`` seconds instead of blocking the operator; connections broken by a restart of the
database are replaced by the pool.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TypeVar

from tickwork.db import connections, store
from tickwork.db import schedules as db
from tickwork.schedules import sync
from tickwork.schedules.definition import ScheduleDefinition

T = TypeVar("T")

POOL_SIZE = 2
OPEN_JOBS_LIMIT = 10_000
"""Most pending and running jobs read for status in one refresh."""

DatabaseError = connections.DatabaseError
"""What a call raises when the database is unreachable or refuses."""


class Database:
    def __init__(self, url: str, *, timeout: float = 5.0) -> None:
        self.url = url
        self.timeout = timeout
        self._pool: connections.Pool | None = None

    def _connection_pool(self) -> connections.Pool:
        if self._pool is None:
            self._pool = connections.pool(self.url, max_size=POOL_SIZE)
            self._pool.open(wait=False)
        return self._pool

    def _run(self, op: store.Op[T]) -> T:
        with self._connection_pool().connection(timeout=self.timeout) as conn:
            return store.run(conn, op)

    async def sync(
        self,
        namespace: str,
        definitions: Sequence[ScheduleDefinition],
        *,
        protect: frozenset[str],
        owner: str,
    ) -> sync.SyncReport:
        """One desired-state sync of ``namespace`` with pruning (one transaction)."""

        def call() -> sync.SyncReport:
            with self._connection_pool().connection(timeout=self.timeout) as conn:
                return sync.sync(
                    conn,
                    namespace,
                    definitions,
                    prune=True,
                    owner=owner,
                    take_over=False,
                    dry_run=False,
                    now=None,
                    protect=protect,
                )

        return await asyncio.to_thread(call)

    async def owned_namespaces(self, owner: str) -> list[str]:
        return await asyncio.to_thread(self._run, db.owned_namespaces(owner))

    async def schedules(self) -> list[db.ScheduleRow]:
        return await asyncio.to_thread(self._run, db.list_schedules(None))

    async def open_jobs(self, namespaces: Sequence[str]) -> list[db.OpenJob]:
        return await asyncio.to_thread(self._run, db.open_job_list(namespaces, OPEN_JOBS_LIMIT))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
