"""The claim statement's cost when jobs on busy concurrency keys are queued ahead.

    python bench/claim.py                                  # 100,000 busy-key jobs ahead
    python bench/claim.py --busy-jobs 0                    # the baseline: nothing ahead
    python bench/claim.py --busy-jobs 100000 --keys 1000   # spread over more busy keys

Each key gets one running job (so it is busy) and its share of --busy-jobs available jobs,
queued first; --jobs unkeyed jobs are queued behind them. The claim statement is then run
(one worker's, batches of --batch, each committed) until the unkeyed jobs are all claimed.
Prints the claim time per statement (median, p95, max) and per job. A claim that passed over
the busy-key jobs and still claimed what is behind them is what this measures: before, the
batch was taken first and the busy-key jobs filtered out of it, so nothing behind them ran.

Uses $TICKWORK_DATABASE_URL when set, otherwise a private PostgreSQL with its default
durability (see servers.py).
"""

from __future__ import annotations

import argparse
import statistics
import time

import measure
import psycopg
import servers

from tickwork.db import jobs as jobs_db
from tickwork.db import migrate, store

KIND = "bench.claim"


def _fill(conn: psycopg.Connection, busy_jobs: int, keys: int, jobs: int) -> None:
    conn.execute("TRUNCATE tickwork.jobs CASCADE")
    conn.execute(
        "INSERT INTO tickwork.jobs (kind, concurrency_key, status, attempt, max_attempts,"
        " picked_by, started_at, lease_expires_at, run_at)"
        " SELECT %s, 'key-' || k, 'running', 1, 5, 'elsewhere', now(), now() + interval '1 hour',"
        " now() - interval '2 hours' FROM generate_series(1, %s) AS k",
        (KIND, keys),
    )
    conn.execute(  # queued ahead: earlier run_at than the unkeyed jobs
        "INSERT INTO tickwork.jobs (kind, concurrency_key, run_at)"
        " SELECT %s, 'key-' || (1 + n %% %s), now() - interval '1 hour' + n * interval '1 ms'"
        " FROM generate_series(1, %s) AS n",
        (KIND, keys, busy_jobs),
    )
    conn.execute(
        "INSERT INTO tickwork.jobs (kind, run_at)"
        " SELECT %s, now() - interval '1 minute' FROM generate_series(1, %s)",
        (KIND, jobs),
    )
    conn.execute("VACUUM ANALYZE tickwork.jobs")


def run(url: str, busy_jobs: int, keys: int, jobs: int, batch: int) -> None:
    migrate.apply(url)
    with measure.worker_connection(url) as conn:
        _fill(conn, busy_jobs, keys, jobs)
        op = jobs_db.claim_jobs("bench", ["default"], {KIND: 5}, batch, 30.0, None)
        times: list[float] = []
        claimed = 0
        while claimed < jobs:
            started = time.perf_counter()
            with conn.transaction():
                got = store.run(conn, op)
            times.append(time.perf_counter() - started)
            if any(job.concurrency_key is not None for job in got):
                raise SystemExit("a job of a busy key was claimed")
            if not got:
                raise SystemExit(f"claim stalled after {claimed} of {jobs} unkeyed jobs")
            claimed += len(got)
    ms = sorted(t * 1000 for t in times)
    p95 = ms[min(len(ms) - 1, int(0.95 * len(ms)))]
    print(
        f"claim: {busy_jobs} jobs on {keys} busy keys ahead, {jobs} unkeyed behind, batch {batch}: "
        f"{len(ms)} claims, median {statistics.median(ms):.1f} ms, p95 {p95:.1f} ms, "
        f"max {ms[-1]:.1f} ms; {sum(ms) * 1000 / claimed:.1f} µs per job claimed"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--busy-jobs", type=int, default=100_000)
    parser.add_argument("--keys", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=1000)
    servers.add_arguments(parser)
    args = parser.parse_args()
    with servers.database_server(args.database_url) as url:
        run(url, args.busy_jobs, args.keys, args.jobs, args.batch)


if __name__ == "__main__":
    main()
