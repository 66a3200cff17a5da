"""Worker expiry: rows of workers that stopped refreshing themselves are removed."""

from __future__ import annotations

import logging
from datetime import datetime

from tickwork.db import connections, store
from tickwork.db import workers as workers_db
from tickwork.logs import fields

log = logging.getLogger(__name__)

NAME = "expire_workers"


async def run_once(
    conn: connections.AsyncConnection, ttl_seconds: float, now: datetime | None
) -> list[str]:
    async with conn.transaction():
        gone = await store.arun(conn, workers_db.expire_workers(ttl_seconds, now))
    for name in gone:
        log.info(
            "expired a worker that stopped refreshing",
            extra=fields(action="worker_expired", worker=name),
        )
    return gone
