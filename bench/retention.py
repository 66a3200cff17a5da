"""Retention: one pass's time and jobs deleted per second, with and without history limits,
on a big history.

    python bench/retention.py                          # 1,000,000 finished jobs, 10,000 schedules
    python bench/retention.py --jobs 200000 --schedules 2000

Loads a database with ``INSERT … SELECT generate_series``: S schedules (history limits 3 and 1,
CronJob's defaults) and J finished jobs of theirs spread over the last 10 days (94 %
succeeded, 3 % dead, 3 % cancelled) beside J/5 one-off finished jobs, then VACUUM ANALYZE.
Each case runs one retention pass (the worker's ``Retention.run_once``, age 7 days, batch
1,000) on a fresh copy of that database (``CREATE DATABASE … TEMPLATE``) and prints its time,
the jobs it deleted, and jobs deleted per second:

* ``age only``: no schedule queued for its history limits; the pass is what retention did
  before them (the age rule, plus one empty look at the queue).
* ``age + limits, all queued``: every schedule queued, as after the upgrade (migration 0011
  queues them all): the age rule, then every schedule's history trimmed to 3 + 1.
* ``steady: age only`` / ``steady: age + limits``: after that first pass, one more job of each
  of S/10 schedules ends (the outcome trigger queues them) and the next pass runs, with the
  queue emptied first (``age only``) or as the trigger left it: the cost of the limits in a
  pass when some schedules had jobs end since the last one.

Runs on a database of its own: on the server of ``--database-url``, or on a private PostgreSQL
with its default durability (see servers.py). Timings on a shared machine are noisy: run it
twice.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import servers
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tickwork.db import migrate
from tickwork.maintenance.retention import Retention, RetentionConfig

NAMESPACES = 10

LOAD = [
    (
        "namespaces",
        """
        INSERT INTO tickwork.schedule_namespaces (namespace, owner)
        SELECT 'ns-' || n, 'bench' FROM generate_series(0, %(namespaces)s - 1) AS n
        """,
    ),
    (
        "schedules",
        """
        INSERT INTO tickwork.schedules (namespace, name, spec, next_run_at)
        SELECT 'ns-' || i %% %(namespaces)s, 's-' || i,
               jsonb_build_object(
                   'every', '1m', 'intervalMode', 'FixedRate', 'timeZone', 'UTC',
                   'suspend', false, 'concurrencyPolicy', 'Allow', 'misfirePolicy', 'Latest',
                   'catchUpLimit', 10, 'jitterSeconds', 0, 'pendingJobsOnDelete', 'Cancel',
                   'successfulJobsHistoryLimit', 3, 'failedJobsHistoryLimit', 1,
                   'job', jsonb_build_object('kind', 'bench.job', 'queue', 'default',
                                             'payload', '{}'::jsonb, 'priority', 0)),
               now() + interval '1 hour'
        FROM generate_series(0, %(schedules)s - 1) AS i
        """,
    ),
    (
        "schedule jobs",
        """
        INSERT INTO tickwork.jobs (kind, payload, status, attempt, max_attempts,
                                   schedule_namespace, schedule_name, occurrence_at,
                                   last_error, run_at, created_at, started_at, finished_at)
        SELECT 'bench.job', jsonb_build_object('n', i), status::tickwork.job_status, 1, 5,
               'ns-' || (i %% %(schedules)s) %% %(namespaces)s, 's-' || i %% %(schedules)s,
               t, CASE WHEN status = 'dead' THEN 'RuntimeError: boom' END, t, t, t,
               t + interval '1 second'
        FROM (
            SELECT i, now() - make_interval(secs => (%(jobs)s - i) * 864000.0 / %(jobs)s) AS t,
                   CASE WHEN i %% 100 < 94 THEN 'succeeded'
                        WHEN i %% 100 < 97 THEN 'dead' ELSE 'cancelled' END AS status
            FROM generate_series(1, %(jobs)s) AS i
        ) AS g
        """,
    ),
    (
        "one-off jobs",
        """
        INSERT INTO tickwork.jobs (kind, status, attempt, run_at, created_at, started_at,
                                   finished_at)
        SELECT 'bench.once', 'succeeded', 1, t, t, t, t + interval '1 second'
        FROM (SELECT now() - make_interval(secs => i * 864000.0 * 5 / %(jobs)s) AS t
              FROM generate_series(1, %(jobs)s / 5) AS i) AS g
        """,
    ),
]

QUEUE_ALL = """
    INSERT INTO tickwork.schedule_history_pending (namespace, name)
    SELECT namespace, name FROM tickwork.schedules ON CONFLICT DO NOTHING
"""
EMPTY_QUEUE = "DELETE FROM tickwork.schedule_history_pending"
END_ONE_JOB_EACH = """
    WITH started AS (
        INSERT INTO tickwork.jobs (kind, status, attempt, schedule_namespace, schedule_name,
                                   picked_by, lease_expires_at, started_at)
        SELECT 'bench.job', 'running', 1, namespace, name, 'bench', now() + interval '1 minute',
               now()
        FROM tickwork.schedules ORDER BY name LIMIT %(count)s
        RETURNING id
    )
    SELECT array_agg(id) FROM started
"""
COMPLETE = """
    UPDATE tickwork.jobs SET status = 'succeeded', finished_at = now(), lease_expires_at = NULL
    WHERE id = ANY(%(ids)s)
"""


def load(url: str, jobs: int, schedules: int) -> None:
    params = {"jobs": jobs, "schedules": schedules, "namespaces": NAMESPACES}
    migrate.apply(url)
    with psycopg.connect(url, autocommit=True) as conn:
        for what, statement in LOAD:
            start = time.perf_counter()
            conn.execute(statement, params)
            print(f"loaded {what} in {time.perf_counter() - start:.1f}s", flush=True)
        conn.execute(EMPTY_QUEUE)
        start = time.perf_counter()
        conn.execute("VACUUM ANALYZE")
        print(f"VACUUM ANALYZE in {time.perf_counter() - start:.1f}s", flush=True)


@contextmanager
def copy_of(template_url: str, name: str) -> Iterator[str]:
    """A fresh database copied from the loaded one, dropped afterwards."""
    server = make_conninfo(template_url, dbname="postgres")
    template = conninfo_to_dict(template_url)["dbname"]
    ident = sql.Identifier(f"{template}_{name}")
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(ident, sql.Identifier(str(template)))
        )
    try:
        yield make_conninfo(template_url, dbname=f"{template}_{name}")
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident))


def one_pass(url: str) -> tuple[float, int]:
    async def main() -> tuple[float, int]:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            start = time.perf_counter()
            deleted = await Retention(RetentionConfig()).run_once(conn, None)
            return time.perf_counter() - start, deleted

    return asyncio.run(main())


def report(case: str, seconds: float, deleted: int) -> None:
    rate = deleted / seconds if seconds else 0.0
    print(f"{case:<28} {seconds:8.2f} s  {deleted:>9,} jobs deleted  {rate:>10,.0f} jobs/s")


def run(url: str, jobs: int, schedules: int) -> None:
    load(url, jobs, schedules)
    print(f"\n{jobs:,} schedule jobs over {schedules:,} schedules, {jobs // 5:,} one-off jobs")
    print(f"{'case':<28} {'pass':>10}  {'deleted':>22}  {'rate':>15}")
    with copy_of(url, "age") as copy:
        report("age only", *one_pass(copy))
    with copy_of(url, "limits") as copy:
        with psycopg.connect(copy, autocommit=True) as conn:
            conn.execute(QUEUE_ALL)
        report("age + limits, all queued", *one_pass(copy))
        with psycopg.connect(copy, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE tickwork.jobs")
            for case, queue in (("steady: age only", False), ("steady: age + limits", True)):
                row = conn.execute(END_ONE_JOB_EACH, {"count": schedules // 10}).fetchone()
                assert row is not None
                conn.execute(COMPLETE, {"ids": row[0]})
                queued = conn.execute("SELECT count(*) FROM tickwork.schedule_history_pending")
                count = queued.fetchone()
                if not queue:
                    conn.execute(EMPTY_QUEUE)
                seconds, deleted = one_pass(copy)
                report(case, seconds, deleted)
                print(f"{'':<28} ({count[0] if count and queue else 0:,} schedules queued)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1_000_000, help="finished schedule jobs")
    parser.add_argument("--schedules", type=int, default=10_000)
    servers.add_arguments(parser)
    args = parser.parse_args()
    with servers.database_server(args.database_url) as url:
        run(url, args.jobs, args.schedules)


if __name__ == "__main__":
    main()
