"""Throughput: enqueue N no-op jobs in bulk, drain them with P worker processes.

    python bench/throughput.py --jobs 100000 --processes 2

Uses $TICKWORK_DATABASE_URL when set, otherwise starts a private PostgreSQL with its default
durability (fsync and synchronous_commit on) under a temporary directory. Prints the enqueue
rate and the drain rate (jobs/s from the first claim to the last success).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import signal
import tempfile
import time
from pathlib import Path

import psycopg

import tickwork
from tickwork.db import migrate
from tickwork.db.embedded import EmbeddedPostgres
from tickwork.settings import WorkerSettings
from tickwork.worker.runner import Worker

KIND = "bench.noop"


def _app(url: str) -> tickwork.App:
    app = tickwork.App(url)

    @app.task(KIND)
    async def noop(job: tickwork.Job) -> None:
        return None

    return app


def _serve(url: str, name: str, concurrency: int, batch: int) -> None:
    settings = WorkerSettings(
        database_url=url,
        app="bench",
        name=name,
        concurrency=concurrency,
        claim_batch=batch,
        poll_seconds=0.5,
    )
    worker = Worker(_app(url), settings)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, worker.stop)
        await worker.run()

    asyncio.run(main())


def _drained(conn: psycopg.Connection) -> bool:
    """No job left available or running (cheap: both are partial-index lookups)."""
    row = conn.execute(
        "SELECT NOT EXISTS (SELECT 1 FROM tickwork.jobs WHERE status = 'available')"
        " AND NOT EXISTS (SELECT 1 FROM tickwork.jobs WHERE status = 'running')"
    ).fetchone()
    return bool(row and row[0])


def run(url: str, jobs: int, processes: int, concurrency: int, batch: int) -> None:
    migrate.apply(url)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE tickwork.jobs")
    app = _app(url)
    started = time.perf_counter()
    for offset in range(0, jobs, 10_000):
        app.enqueue_many(KIND, [{"n": n} for n in range(offset, min(offset + 10_000, jobs))])
    enqueue_s = time.perf_counter() - started
    app.close()
    print(f"enqueue: {jobs} jobs in {enqueue_s:.2f}s = {jobs / enqueue_s:,.0f} jobs/s")

    ctx = multiprocessing.get_context("spawn")
    workers = [
        ctx.Process(target=_serve, args=(url, f"bench-{i}", concurrency, batch))
        for i in range(processes)
    ]
    for p in workers:
        p.start()
    with psycopg.connect(url, autocommit=True) as conn:
        while not _drained(conn):
            time.sleep(0.1)
        row = conn.execute(
            "SELECT extract(epoch FROM max(finished_at) - min(started_at)),"
            " count(*) FILTER (WHERE status = 'succeeded') FROM tickwork.jobs"
        ).fetchone()
    assert row is not None
    drain_s, succeeded = float(row[0]), int(row[1])
    for p in workers:
        os.kill(p.pid or 0, signal.SIGTERM)
    for p in workers:
        p.join()
    print(
        f"drain: P={processes} concurrency={concurrency} batch={batch}: {succeeded} of {jobs} "
        f"jobs succeeded in {drain_s:.2f}s = {succeeded / drain_s:,.0f} jobs/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=1000)
    args = parser.parse_args()
    url = os.environ.get("TICKWORK_DATABASE_URL")
    if url:
        run(url, args.jobs, args.processes, args.concurrency, args.batch)
        return
    with tempfile.TemporaryDirectory(prefix="tickwork-bench-") as tmp:
        os.chmod(tmp, 0o711)  # the server's own user must reach its data directory
        with EmbeddedPostgres(Path(tmp) / "pg") as pg:
            run(pg.conninfo, args.jobs, args.processes, args.concurrency, args.batch)


if __name__ == "__main__":
    main()
