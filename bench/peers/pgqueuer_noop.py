"""pgqueuer's side of bench/peers.py, run by the interpreter of bench/peers/.venv (where
requirements.txt installs pgqueuer): install its schema, enqueue no-op jobs, or drain them.

    python pgqueuer_noop.py install URL
    python pgqueuer_noop.py enqueue URL JOBS      # in one transaction
    python pgqueuer_noop.py consume URL BATCH     # prints "ready" once listening; until SIGTERM

A consumer is pgqueuer's QueueManager on one asyncpg connection (as its quick start does),
with a no-op entrypoint and ``batch_size=BATCH``; everything else is pgqueuer's default.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from datetime import timedelta

import asyncpg
from pgqueuer.db import AsyncpgDriver
from pgqueuer.models import Job
from pgqueuer.qm import QueueManager
from pgqueuer.queries import Queries
from pgqueuer.types import QueueExecutionMode

ENTRYPOINT = "noop"
CHUNK = 10_000


async def install(url: str) -> None:
    connection = await asyncpg.connect(url)
    try:
        await Queries(AsyncpgDriver(connection)).install()
    finally:
        await connection.close()


async def enqueue(url: str, jobs: int) -> None:
    connection = await asyncpg.connect(url)
    try:
        queries = Queries(AsyncpgDriver(connection))
        async with connection.transaction():
            for offset in range(0, jobs, CHUNK):
                n = min(CHUNK, jobs - offset)
                await queries.enqueue([ENTRYPOINT] * n, [None] * n, [0] * n)
    finally:
        await connection.close()


async def consume(url: str, batch: int) -> None:
    connection = await asyncpg.connect(url)
    qm = QueueManager(Queries(AsyncpgDriver(connection)))

    @qm.entrypoint(ENTRYPOINT)
    async def noop(job: Job) -> None:
        return None

    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, qm.shutdown.set)
    run = asyncio.create_task(qm.run(batch_size=batch, mode=QueueExecutionMode.continuous))
    while not run.done():
        try:
            await qm.listener_healthy(timeout=timedelta(seconds=1))
        except Exception:  # not listening yet
            continue
        print("ready", flush=True)
        break
    await run


def main() -> None:
    command, url, *rest = sys.argv[1:]
    if command == "install":
        asyncio.run(install(url))
    elif command == "enqueue":
        asyncio.run(enqueue(url, int(rest[0])))
    elif command == "consume":
        asyncio.run(consume(url, int(rest[0])))
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main()
