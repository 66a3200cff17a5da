"""Throughput: enqueue N no-op jobs in bulk, drain them with P worker processes.

    python bench/throughput.py --jobs 100000 --processes 2
    python bench/throughput.py --metrics off                 # the workers record no job metrics
    python bench/throughput.py --compare 3                   # off, on, off, on, ...: the cost
    python bench/throughput.py --compare 5 --cost counts     # the job counts' trigger off, on
    python bench/throughput.py --compare 3 --cost limits     # a limited queue off, on
    python bench/throughput.py --compare 3 --cost tenants    # one tenant, then 10 tenants

Runs on a database of its own: on the server of ``--database-url``, or on a private PostgreSQL
with its default durability (see servers.py). Prints the enqueue
rate, the drain rate (jobs/s from the first claim to the last success), the workers' CPU
time per job (their start-up included) and the PostgreSQL server's CPU time per job while
they drained (when it runs on this host); with --compare, the medians of them with job metrics
(or, with --cost counts, the trigger jobs_ended that writes tickwork.job_counts, disabled
for the "off" rounds; with --cost limits, a concurrency limit and a rate on the queue, too
high to hold a job back, set for the "on" rounds; with --cost tenants, the jobs spread over 10
schedule namespaces for the "on" rounds, so that each claim shares its batch between 10
tenants, against all of them enqueued from code, one tenant) off and on, and what they cost. On a
shared machine the CPU times per job are the steadier figures: other processes slow the
drain rate, not the work done per job.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import resource
import signal
import statistics
import time

import measure
import psycopg
import servers

import tickwork
from tickwork import metrics
from tickwork.db import migrate
from tickwork.settings import WorkerSettings
from tickwork.worker.runner import Worker

KIND = "bench.noop"
TENANTS = 10
"""Schedule namespaces the jobs of --cost tenants' "on" rounds are spread over."""


def _app(url: str) -> tickwork.App:
    app = tickwork.App(url)

    @app.task(KIND)
    async def noop(job: tickwork.Job) -> None:
        return None

    return app


def _serve(url: str, name: str, concurrency: int, batch: int, with_metrics: bool) -> None:
    settings = WorkerSettings(
        database_url=url,
        app="bench",
        name=name,
        concurrency=concurrency,
        claim_batch=batch,
        poll_seconds=0.5,
    )
    worker = Worker(_app(url), settings, meters=metrics.JobMeters(enabled=with_metrics))

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


def _children_cpu() -> float:
    """CPU seconds of the child processes that ended so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(
    url: str,
    jobs: int,
    processes: int,
    concurrency: int,
    batch: int,
    with_metrics: bool,
    counted: bool = True,
    limited: bool = False,
    tenants: int = 0,
) -> tuple[float, float, float | None]:
    """One round; returns the drain rate (jobs/s), the workers' CPU µs per job and the
    server's (None: not on this host). ``counted``: the trigger jobs_ended is enabled;
    ``limited``: the queue has a concurrency limit and a rate that never hold a job back
    (100,000 running, 1,000,000/s), so every claim takes the path of a limited queue;
    ``tenants``: more than 1 spreads the jobs over that many schedule namespaces (as jobs of a
    schedule ``bench`` in each, with no schedule row), so the claims share their batches
    between them; 1 leaves them to one tenant; either vacuums the table before the drain (the
    update leaves a dead row per job), 0 (the default) does not."""
    migrate.apply(url)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE tickwork.jobs, tickwork.job_counts, tickwork.flow_rules CASCADE")
        switch = "ENABLE" if counted else "DISABLE"
        conn.execute(f"ALTER TABLE tickwork.jobs {switch} TRIGGER jobs_ended")
    app = _app(url)
    if limited:
        app.set_limit("queue", "default", max_running=100_000, rate="1000000/s", actor="bench")
    started = time.perf_counter()
    for offset in range(0, jobs, 10_000):
        app.enqueue_many(KIND, [{"n": n} for n in range(offset, min(offset + 10_000, jobs))])
    enqueue_s = time.perf_counter() - started
    app.close()
    print(f"enqueue: {jobs} jobs in {enqueue_s:.2f}s = {jobs / enqueue_s:,.0f} jobs/s")
    if tenants:
        with psycopg.connect(url, autocommit=True) as conn:
            if tenants > 1:
                conn.execute(
                    "UPDATE tickwork.jobs SET schedule_namespace = 'tenant-' || id %% %s,"
                    " schedule_name = 'bench'",
                    (tenants,),
                )
            conn.execute("VACUUM ANALYZE tickwork.jobs")  # off and on: tables alike

    cpu_before, server_before = _children_cpu(), measure.server_cpu(url)
    ctx = multiprocessing.get_context("spawn")
    workers = [
        ctx.Process(target=_serve, args=(url, f"bench-{i}", concurrency, batch, with_metrics))
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
    server_after = measure.server_cpu(url)
    for p in workers:
        os.kill(p.pid or 0, signal.SIGTERM)
    for p in workers:
        p.join()
    rate = succeeded / drain_s
    cpu_us = (_children_cpu() - cpu_before) / succeeded * 1e6
    server_us = None
    if server_before is not None and server_after is not None:
        server_us = (server_after - server_before) / succeeded * 1e6
    server = "" if server_us is None else f"; server CPU {server_us:.1f} µs/job"
    print(
        f"drain: P={processes} concurrency={concurrency} batch={batch} "
        f"metrics={'on' if with_metrics else 'off'} counts={'on' if counted else 'off'} "
        f"limits={'on' if limited else 'off'} tenants={max(1, tenants)}: "
        f"{succeeded} of {jobs} jobs succeeded in {drain_s:.2f}s = {rate:,.0f} jobs/s; "
        f"worker CPU {cpu_us:.1f} µs/job{server}"
    )
    return rate, cpu_us, server_us


def compare(
    url: str, rounds: int, jobs: int, processes: int, concurrency: int, batch: int, cost: str
) -> None:
    """Alternate rounds with ``cost`` (job metrics, the job counts' trigger, or a queue limit
    that holds nothing back) off and on; print the medians and the cost."""
    results: dict[bool, list[tuple[float, float, float | None]]] = {False: [], True: []}
    for _ in range(rounds):
        for on in (False, True):
            metrics_on = on if cost == "metrics" else True
            counted = on if cost == "counts" else True
            limited = on and cost == "limits"
            tenants = 0 if cost != "tenants" else TENANTS if on else 1
            results[on].append(
                run(url, jobs, processes, concurrency, batch, metrics_on, counted, limited, tenants)
            )
    off, on = (statistics.median(r[0] for r in results[m]) for m in (False, True))
    cpu_off, cpu_on = (statistics.median(r[1] for r in results[m]) for m in (False, True))
    line = (
        f"median of {rounds}, {cost} off vs on: drain rate off {off:,.0f} jobs/s, "
        f"on {on:,.0f} jobs/s: on/off = {on / off:.3f} (cost {100 * (1 - on / off):+.1f}%); "
        f"worker CPU off {cpu_off:.1f} µs/job, on {cpu_on:.1f} µs/job "
        f"(cost {100 * (cpu_on / cpu_off - 1):+.1f}%)"
    )
    servers_us = [[r[2] for r in results[m] if r[2] is not None] for m in (False, True)]
    if all(servers_us):
        s_off, s_on = (statistics.median(values) for values in servers_us)
        line += (
            f"; server CPU off {s_off:.1f} µs/job, on {s_on:.1f} µs/job "
            f"(cost {100 * (s_on / s_off - 1):+.1f}%)"
        )
    print(line)


def _main(url: str, args: argparse.Namespace) -> None:
    if args.compare:
        compare(
            url, args.compare, args.jobs, args.processes, args.concurrency, args.batch, args.cost
        )
    else:
        run(url, args.jobs, args.processes, args.concurrency, args.batch, args.metrics == "on")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument(
        "--metrics",
        choices=("on", "off"),
        default="on",
        help="whether the workers record job metrics (default on)",
    )
    parser.add_argument(
        "--compare",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="run ROUNDS rounds each with --cost off and on, alternating; print the cost",
    )
    parser.add_argument(
        "--cost",
        choices=("metrics", "counts", "limits", "tenants"),
        default="metrics",
        help="what --compare turns off and on: the workers' job metrics (default), the "
        "trigger jobs_ended that counts how jobs end (tickwork.job_counts; for these jobs, of no "
        "schedule and no dependent, all it does), or a limit and "
        "a rate on the queue too high to hold a job back (the claims' cost of a limited queue), "
        f"or the jobs spread over {TENANTS} tenants instead of one (fair claiming's cost)",
    )
    servers.add_arguments(parser)
    args = parser.parse_args()
    with servers.database_server(args.database_url) as url:
        _main(url, args)


if __name__ == "__main__":
    main()
