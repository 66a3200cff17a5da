"""Admin console: every page and API answer timed on a big database.

    python bench/admin.py                                  # 1,000,000 jobs, 10,000 schedules
    python bench/admin.py --jobs 200000 --runs 5

Loads a fresh database with ``INSERT … SELECT generate_series``: 100 schedule namespaces
(half owned by the operator), 10,000 schedules, 1,000,000 jobs spread over 7 days (94 %
succeeded, 2 % dead, 1 % cancelled, 1.5 % due — a third of them failing —, 1 % due later,
0.5 % running; 30 % fired by a schedule) with their counts (tickwork.job_counts, merged per
hour and per day as retention merges them), 20 workers
(15 alive, offering 80 namespaces; two kinds served by nobody) and 10,000 audit records;
then VACUUM ANALYZE. Serves the console in-process and times each page and API endpoint over
HTTP (an operator's bearer token; the jobs pages also as a viewer scoped to five namespaces,
``SCOPE``, filtered by kind among others), sequentially, ``--runs`` times after one warm-up: prints
p50 and max per endpoint, and marks those over the 300 ms target. The actions are timed on a
fresh target each run.

Runs on a database of its own: on the server of ``--database-url``, or on a private PostgreSQL
with its default durability (see servers.py).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from dataclasses import dataclass

import aiohttp
import psycopg
import servers

import tickwork
from tickwork.admin import server
from tickwork.admin.auth import Credentials, parse_credentials
from tickwork.admin.console import Console
from tickwork.admin.settings import AdminSettings
from tickwork.db import job_counts as job_counts_db
from tickwork.db import migrate, store
from tickwork.maintenance.retention import RetentionConfig

TOKEN = "bench-operator-token-0123456789"
VIEWER_TOKEN = "bench-viewer-token-0123456789"
SCOPE = "ns-040,ns-041,ns-042,ns-045,ns-050"
"""A viewer's schedule namespaces: four with 10,000 jobs each (at 1M), of kinds 0, 1, 2 and
10, and one with none."""
SCOPED_READS = [
    "/jobs",
    "/jobs?kind=kind-7",  # no job of the scope has it: before migration 0024, the whole table
    "/jobs?kind=kind-2",
    "/jobs?kind=kind-2&status=dead",
    "/jobs?namespace=ns-045&kind=kind-7",
]
"""Pages timed for the scoped viewer too (and their API answers)."""
TARGET_MS = 300.0
NAMESPACES = 100
KINDS = 20
QUEUES = 5
WORKERS = 20

LOAD = [
    (
        "namespaces",
        """
        INSERT INTO tickwork.schedule_namespaces (namespace, owner)
        SELECT format('ns-%%s', lpad(n::text, 3, '0')),
               CASE WHEN n %% 2 = 0 THEN 'tickwork' ELSE 'operator:prod' END
        FROM generate_series(0, %(namespaces)s - 1) AS n
        """,
    ),
    (
        "schedules",
        """
        INSERT INTO tickwork.schedules (namespace, name, spec, next_run_at, suspended,
                                        skipped_occurrences)
        SELECT format('ns-%%s', lpad((i %% %(namespaces)s)::text, 3, '0')),
               format('s-%%s', lpad(i::text, 5, '0')),
               jsonb_build_object(
                   'schedule', '*/5 * * * *', 'timeZone', 'UTC', 'suspend', i %% 50 = 0,
                   'concurrencyPolicy', 'Forbid', 'misfirePolicy', 'Latest',
                   'job', jsonb_build_object('kind', 'kind-' || i %% %(kinds)s,
                                             'queue', 'q-' || i %% %(queues)s,
                                             'payload', '{}'::jsonb, 'priority', 0)),
               now() + make_interval(secs => i %% 300), i %% 50 = 0, i %% 7
        FROM generate_series(0, %(schedules)s - 1) AS i
        """,
    ),
    (
        "jobs",
        """
        INSERT INTO tickwork.jobs (
            kind, queue, payload, priority, run_at, status, attempt, max_attempts,
            schedule_namespace, schedule_name, occurrence_at, picked_by, lease_expires_at,
            last_error, created_at, started_at, finished_at)
        SELECT 'kind-' || i %% %(kinds)s, 'q-' || i %% %(queues)s,
               jsonb_build_object('n', i, 'note', 'a payload of modest size'), 0,
               CASE WHEN status = 'available' AND r >= 985 THEN now() + make_interval(secs => r)
                    ELSE t END,
               status::tickwork.job_status,
               CASE WHEN status = 'available' AND r %% 3 <> 0 THEN 0
                    WHEN status = 'dead' THEN 5 ELSE 1 END,
               5,
               CASE WHEN i %% 10 < 3
                    THEN format('ns-%%s',
                                lpad((i %% %(schedules)s %% %(namespaces)s)::text, 3, '0'))
               END,
               CASE WHEN i %% 10 < 3
                    THEN format('s-%%s', lpad((i %% %(schedules)s)::text, 5, '0')) END,
               CASE WHEN i %% 10 < 3 THEN t END,
               CASE WHEN status = 'running' THEN 'worker-' || i %% %(workers)s END,
               CASE WHEN status = 'running' THEN now() + interval '30 seconds' END,
               CASE WHEN status = 'dead' OR (status = 'available' AND r < 985 AND r %% 3 = 0)
                    THEN 'RuntimeError: upstream answered 503 for item ' || i END,
               t,
               CASE WHEN status NOT IN ('available') THEN t END,
               CASE WHEN status IN ('succeeded', 'dead', 'cancelled')
                    THEN t + interval '1 second' END
        FROM (
            SELECT i, i %% 1000 AS r,
                   now() - make_interval(secs => (%(jobs)s - i) * 604800.0 / %(jobs)s) AS t,
                   CASE WHEN i %% 1000 < 940 THEN 'succeeded'
                        WHEN i %% 1000 < 960 THEN 'dead'
                        WHEN i %% 1000 < 970 THEN 'cancelled'
                        WHEN i %% 1000 < 995 THEN 'available'
                        ELSE 'running' END AS status
            FROM generate_series(1, %(jobs)s) AS i
        ) AS g
        """,
    ),
    (
        "job counts",
        # what the trigger jobs_ended would have written as these jobs ended, from two
        # worker connections (shards)
        """
        INSERT INTO tickwork.job_counts (minute, schedule_namespace, schedule_name, queue, kind,
                                         outcome, shard, jobs, timed, run_seconds, lagged,
                                         lag_seconds, max_lag_seconds)
        SELECT date_trunc('minute', finished_at), coalesce(schedule_namespace, ''),
               coalesce(schedule_name, ''), queue, kind, status::text, id %% 2,
               count(*), count(*), sum(extract(epoch FROM finished_at - started_at)),
               count(occurrence_at),
               coalesce(sum(extract(epoch FROM started_at - occurrence_at)), 0),
               max(extract(epoch FROM started_at - occurrence_at))
        FROM tickwork.jobs
        WHERE status IN ('succeeded', 'dead', 'cancelled')
        GROUP BY 1, 2, 3, 4, 5, 6, 7
        """,
    ),
    (
        "last jobs of schedules",
        """
        UPDATE tickwork.schedules s
        SET last_job_id = j.id, last_occurrence_at = j.occurrence_at,
            last_job_status = j.status, last_success_at = j.finished_at
        FROM (SELECT DISTINCT ON (schedule_namespace, schedule_name)
                     schedule_namespace, schedule_name, id, occurrence_at, status, finished_at
              FROM tickwork.jobs WHERE schedule_name IS NOT NULL
              ORDER BY schedule_namespace, schedule_name, id DESC) AS j
        WHERE s.namespace = j.schedule_namespace AND s.name = j.schedule_name
        """,
    ),
    (
        "workers",
        """
        INSERT INTO tickwork.workers (name, queues, kinds, namespaces, concurrency, host, pid,
                                      started_at, last_seen_at)
        SELECT 'worker-' || w,
               ARRAY(SELECT 'q-' || q FROM generate_series(0, %(queues)s - 1) AS q),
               ARRAY(SELECT 'kind-' || k FROM generate_series(0, %(kinds)s - 3) AS k),
               ARRAY(SELECT format('ns-%%s', lpad(n::text, 3, '0'))
                     FROM generate_series(w * 4, w * 4 + 3) AS n WHERE n < 80),
               50, 'node-' || w %% 3, 1000 + w, now() - interval '1 day',
               CASE WHEN w < 15 THEN now() ELSE now() - interval '1 hour' END
        FROM generate_series(0, %(workers)s - 1) AS w
        """,
    ),
    (
        "audit records",
        """
        INSERT INTO tickwork.audit_log (at, actor, action, target, reason, request_id, details)
        SELECT now() - make_interval(secs => i * 60),
               'user-' || i %% 7,
               (ARRAY['cancel', 'retry', 'run_now', 'trigger'])[i %% 4 + 1],
               CASE WHEN i %% 4 = 3
                    THEN format('schedule:ns-%%s/s-%%s', lpad((i %% %(namespaces)s)::text, 3, '0'),
                                lpad(i::text, 5, '0'))
                    ELSE 'job:' || (i * 97 %% %(jobs)s + 1) END,
               'bench', 'bench-' || i,
               jsonb_build_object('before', jsonb_build_object('status', 'dead'),
                                  'after', jsonb_build_object('status', 'available'))
        FROM generate_series(1, 10000) AS i
        """,
    ),
]


def load(url: str, jobs: int, schedules: int) -> None:
    params = {
        "jobs": jobs,
        "schedules": schedules,
        "namespaces": NAMESPACES,
        "kinds": KINDS,
        "queues": QUEUES,
        "workers": WORKERS,
    }
    migrate.apply(url)
    with psycopg.connect(url, autocommit=True) as conn:
        for what, statement in LOAD:
            start = time.perf_counter()
            conn.execute(statement, params)
            print(f"loaded {what} in {time.perf_counter() - start:.1f}s", flush=True)
        start = time.perf_counter()
        config = RetentionConfig()
        for unit, age in (("hour", config.per_minute_seconds), ("day", config.per_hour_seconds)):
            while store.run(conn, job_counts_db.compact(unit, age, 100_000, None)):
                pass
        print(f"merged old job counts in {time.perf_counter() - start:.1f}s", flush=True)
        start = time.perf_counter()
        conn.execute("VACUUM ANALYZE")
        print(f"VACUUM ANALYZE in {time.perf_counter() - start:.1f}s", flush=True)


@dataclass(frozen=True)
class Targets:
    max_id: int
    dead_id: int
    delayed: list[int]
    """Jobs due later: one per run, to run now, cancel and retry."""


def targets(url: str, runs: int) -> Targets:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT (SELECT max(id) FROM tickwork.jobs),"
            " (SELECT max(id) FROM tickwork.jobs WHERE status = 'dead')"
        ).fetchone()
        assert row is not None
        delayed = conn.execute(
            "SELECT id FROM tickwork.jobs WHERE status = 'available' AND run_at > now()"
            " ORDER BY id DESC LIMIT %s",
            (runs + 1,),
        ).fetchall()
        return Targets(row[0], row[1], [r[0] for r in delayed])


def endpoints(ids: Targets) -> list[str]:
    middle = ids.max_id // 2
    reads = [
        "/",
        "/schedules",
        "/schedules?namespace=ns-042",
        "/schedules?after_namespace=ns-050&after_name=s-05050",
        "/schedules/ns-042/s-00042",
        "/jobs",
        "/jobs?status=dead",
        "/jobs?status=failing",
        "/jobs?status=running",
        "/jobs?status=available",
        "/jobs?kind=kind-7",
        "/jobs?queue=q-3",
        "/jobs?queue=no-such-queue",  # the worst case: the whole table read from the key
        "/jobs?kind=no-such-kind",
        "/jobs?status=dead&kind=kind-7",
        "/jobs?status=cancelled&queue=q-1",
        "/jobs?namespace=ns-042&schedule=s-00042",
        f"/jobs?before={middle}",
        f"/jobs?status=dead&before={middle}",
        f"/jobs/{ids.dead_id}",
        "/audit",
        "/audit?before=5000",
    ]
    api = ["/api" + (path if path != "/" else "/overview") for path in reads]
    return [*reads, *api]


def summary(samples: list[float]) -> tuple[float, float]:
    return statistics.median(samples), max(samples)


async def measure(url: str, runs: int, ids: Targets) -> bool:
    app = tickwork.App(url)
    credentials = Credentials(
        parse_credentials(f"bench:operator:{TOKEN} scoped:viewer@{SCOPE}:{VIEWER_TOKEN}", "bench")
    )
    console = Console(app, AdminSettings(port=0), credentials)
    runner = aiohttp.web.AppRunner(server.build(console), access_log=None)
    await runner.setup()
    site = aiohttp.web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    base = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {TOKEN}"}
    viewer = {"Authorization": f"Bearer {VIEWER_TOKEN}"}
    scoped = [*SCOPED_READS, *("/api" + path for path in SCOPED_READS)]
    results: dict[str, list[float]] = {}
    all_fast = True
    try:
        async with aiohttp.ClientSession(base, headers=headers) as http:

            async def timed(
                method: str, path: str, body: object = None, as_viewer: bool = False
            ) -> float:
                start = time.perf_counter()
                extra = viewer if as_viewer else None
                async with http.request(method, path, json=body, headers=extra) as response:
                    await response.read()
                    if response.status != 200:
                        raise RuntimeError(f"{method} {path}: {response.status}")
                return (time.perf_counter() - start) * 1000

            paths = endpoints(ids)
            for run in range(runs + 1):  # run 0 warms up
                for path in paths:
                    elapsed = await timed("GET", path)
                    if run:
                        results.setdefault(f"GET {path}", []).append(elapsed)
                for path in scoped:
                    elapsed = await timed("GET", path, as_viewer=True)
                    if run:
                        results.setdefault(f"GET {path} (viewer@{SCOPE})", []).append(elapsed)
                # actions, each run on a job not touched before: run now, cancel, retry
                available = ids.delayed[run]
                actions = [
                    ("POST /api/jobs/{id}/run-now", f"/api/jobs/{available}/run-now"),
                    ("POST /api/jobs/{id}/cancel", f"/api/jobs/{available}/cancel"),
                    ("POST /api/jobs/{id}/retry", f"/api/jobs/{available}/retry"),
                    (
                        "POST /api/schedules/{ns}/{name}/trigger",
                        "/api/schedules/ns-042/s-00042/trigger",
                    ),
                ]
                for name, path in actions:
                    elapsed = await timed("POST", path, {"reason": "bench"})
                    if run:
                        results.setdefault(name, []).append(elapsed)
    finally:
        await runner.cleanup()
        await app.close_async()
    width = max(len(name) for name in results)
    print(f"\n{'endpoint'.ljust(width)}  {'p50 ms':>8}  {'max ms':>8}")
    for name, samples in results.items():
        p50, worst = summary(samples)
        mark = "" if worst < TARGET_MS else "  OVER TARGET"
        all_fast &= worst < TARGET_MS
        print(f"{name.ljust(width)}  {p50:8.1f}  {worst:8.1f}{mark}")
    return all_fast


def _main(url: str, args: argparse.Namespace) -> None:
    start = time.perf_counter()
    load(url, args.jobs, args.schedules)
    print(
        f"loaded {args.jobs:,} jobs and {args.schedules:,} schedules "
        f"in {time.perf_counter() - start:.0f}s"
    )
    ids = targets(url, args.runs)
    fast = asyncio.run(measure(url, args.runs, ids))
    print(f"\nevery endpoint under {TARGET_MS:.0f} ms: {'yes' if fast else 'NO'}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--schedules", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=7, help="timed runs per endpoint")
    servers.add_arguments(parser)
    args = parser.parse_args()
    with servers.database_server(args.database_url) as url:
        _main(url, args)


if __name__ == "__main__":
    main()
