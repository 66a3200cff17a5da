"""How long each migration holds its locks on tickwork.jobs and tickwork.schedules, at
1,000,000 schedules and 10,000,000 jobs (issue 31).

    nice -n 10 python bench/migration_locks.py                # 1,000,000 schedules, 10,000,000 jobs
    python bench/migration_locks.py --schedules 10000 --jobs 100000

Migrates a fresh database up to the last migration before the first one that takes a long lock
(0003), fills it with ``INSERT … SELECT generate_series`` (the tables as a busy installation
has them: S schedules in 100 namespaces with the canonical spec of an every-minute schedule;
J jobs over the last 6 days, 94 % succeeded, 2 % dead, 1 % cancelled, 2.9 % waiting,
0.1 % running; 60 % of them fired by the schedules, 5 % with a concurrency key, 1 % with a
unique key, 10 % in a second queue, 1 % of priority 1), VACUUM ANALYZE, then applies every
later migration one at a time with the runner itself (``migrate.apply(until=N)``: one
transaction each, so a lock taken by any statement is held until its commit).

While a migration runs, four probes on connections of their own repeat what the fleet does,
each in a transaction that is rolled back (so the data stays as filled), with a pause of
20 ms between two of their own:

* ``claim``: lock the next waiting job (``FOR UPDATE SKIP LOCKED``) and mark it running;
* ``enqueue``: insert a job;
* ``fire``: move a schedule's next run on, as a firing pass does;
* ``read``: read one job by its id (as the console does; only an ACCESS EXCLUSIVE lock stops it).

For each migration it prints its time (its transaction, the lock time of whatever it locks) and
the longest time each probe took while it ran: how long a worker, a producer or a firing
pass was held up. Lines of migrations under 0.1 s with no probe held up past 0.1 s are
folded into one. The private server (see servers.py) keeps PostgreSQL's defaults
(``maintenance_work_mem`` 64 MB, fsync on).
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import psycopg
import servers

from tickwork.db import migrate
from tickwork.schedules.definition import JobTemplate, ScheduleDefinition

FILLED_AT = 3
"""The fill happens on the schema of this migration: every later one is measured."""
NAMESPACES = 100
CHUNK = 1_000_000
PAUSE = 0.02
FOLD = 0.1

SPEC = ScheduleDefinition(
    name="x",
    job=JobTemplate(kind="bench.job", payload={"n": 0}),
    every=timedelta(minutes=1),
    starting_deadline_seconds=300,
).to_spec()

SCHEDULES = """
INSERT INTO tickwork.schedules (namespace, name, spec, next_run_at, last_occurrence_at,
                                last_job_status, last_success_at, created_at, updated_at)
SELECT 'ns-' || lpad((i %% {namespaces})::text, 2, '0'), 'schedule-' || i,
       jsonb_set(%(spec)s::jsonb, '{{job,payload,n}}', to_jsonb(i)),
       %(base)s + (i %% 60) * interval '1 second',
       %(base)s - (60 - i %% 60) * interval '1 second',
       'succeeded', %(base)s - interval '2 minutes', %(base)s - interval '30 days', %(base)s
FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS i
"""

# Row i of J: created 50 ms after row i-1 (J = 10,000,000 spans 5.8 days, inside the default
# 7-day retention); its status by i % 1000; 60 % fired by schedule i % S (its occurrence i / S
# minutes before the whole minute BASE, so the occurrence key stays unique).
JOBS = """
INSERT INTO tickwork.jobs (kind, queue, payload, priority, run_at, status, attempt, max_attempts,
                           concurrency_key, unique_key, schedule_namespace, schedule_name,
                           occurrence_at, picked_by, lease_expires_at, last_error, created_at,
                           started_at, finished_at)
SELECT CASE WHEN i %% 7 = 0 THEN 'bench.other' ELSE 'bench.job' END,
       CASE WHEN i %% 10 = 0 THEN 'billing' ELSE 'default' END,
       jsonb_build_object('order', i, 'customer', 'c-' || (i %% 10000), 'note', repeat('x', 40)),
       CASE WHEN i %% 100 = 1 THEN 1 ELSE 0 END,
       t, s::tickwork.job_status,
       CASE WHEN s = 'available' THEN 0 ELSE 1 END, 25,
       CASE WHEN i %% 20 = 0 THEN 'key-' || i END,
       CASE WHEN i %% 100 = 3 THEN 'u-' || i END,
       CASE WHEN fired
            THEN 'ns-' || lpad((i %% %(schedules)s::bigint %% {namespaces})::text, 2, '0') END,
       CASE WHEN fired THEN 'schedule-' || (i %% %(schedules)s::bigint) END,
       CASE WHEN fired THEN %(base)s - (i / %(schedules)s::bigint) * interval '1 minute' END,
       CASE WHEN s <> 'available' THEN 'worker-' || (i %% 50) END,
       CASE WHEN s = 'running' THEN %(base)s + interval '30 seconds' END,
       CASE WHEN s = 'dead' THEN 'ValueError: bench' END,
       t,
       CASE WHEN s <> 'available' THEN t + interval '1 second' END,
       CASE WHEN s IN ('succeeded', 'dead', 'cancelled') THEN t + interval '2 seconds' END
FROM (
    SELECT i, %(base)s - (%(jobs)s::bigint - i) * interval '50 milliseconds' AS t,
           i %% 10 < 6 AS fired,
           CASE WHEN i %% 1000 < 940 THEN 'succeeded'
                WHEN i %% 1000 < 960 THEN 'dead'
                WHEN i %% 1000 < 970 THEN 'cancelled'
                WHEN i %% 1000 < 999 THEN 'available'
                ELSE 'running' END AS s
    FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS i
) AS rows
"""

PROBES = {
    "claim": "UPDATE tickwork.jobs SET status = 'running', attempt = attempt + 1,"
    " lease_expires_at = now() + interval '30 seconds', picked_by = 'probe'"
    " WHERE id = (SELECT id FROM tickwork.jobs WHERE status = 'available'"
    " ORDER BY priority DESC, run_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)",
    "enqueue": "INSERT INTO tickwork.jobs (kind, payload) VALUES ('bench.probe', '{}')",
    "fire": "UPDATE tickwork.schedules SET next_run_at = next_run_at + interval '1 minute',"
    " updated_at = now() WHERE namespace = 'ns-07' AND name = 'schedule-7'",
    "read": "SELECT status FROM tickwork.jobs WHERE id = 12345",
}


@dataclass
class Probe:
    """One probe's loop on its own connection, recording when each of its statements (with
    its rollback) started and ended."""

    url: str
    statement: str
    spans: list[tuple[float, float]] = field(default_factory=list)
    deadlocks: list[float] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self.stop.is_set():
                started = time.monotonic()
                try:
                    with conn.transaction(force_rollback=True):
                        conn.execute(self.statement)
                except psycopg.errors.DeadlockDetected:
                    # A migration locking both tables, against a worker's statement that
                    # locks them in the other order: PostgreSQL aborts one of the two.
                    self.deadlocks.append(time.monotonic())
                self.spans.append((started, time.monotonic()))
                self.stop.wait(PAUSE)

    def deadlocked(self, start: float, end: float) -> int:
        """How many of this probe's statements a deadlock aborted within [start, end]."""
        return sum(start <= at <= end for at in self.deadlocks)

    def held_up(self, start: float, end: float) -> float:
        """The longest time one statement of this probe was in flight within [start, end]."""
        return max((min(e, end) - max(s, start) for s, e in self.spans), default=0.0)


def fill(url: str, schedules: int, jobs: int) -> None:
    base = datetime.now(UTC).replace(second=0, microsecond=0)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO tickwork.schedule_namespaces (namespace, owner)"
            " SELECT 'ns-' || lpad(i::text, 2, '0'), 'bench' FROM generate_series(0, %s) AS i",
            (NAMESPACES - 1,),
        )
        spec = json.dumps(SPEC)
        for first in range(0, schedules, CHUNK):
            last = min(first + CHUNK, schedules) - 1
            conn.execute(
                SCHEDULES.format(namespaces=NAMESPACES).encode(),
                {"spec": spec, "first": first, "last": last, "base": base},
            )
        for first in range(0, jobs, CHUNK):
            started = time.monotonic()
            last = min(first + CHUNK, jobs) - 1
            conn.execute(
                JOBS.format(namespaces=NAMESPACES).encode(),
                {"first": first, "last": last, "jobs": jobs, "schedules": schedules, "base": base},
            )
            print(f"  jobs {last + 1:,} ({time.monotonic() - started:.0f} s)", flush=True)
        conn.execute("VACUUM ANALYZE tickwork.schedules")
        conn.execute("VACUUM ANALYZE tickwork.jobs")
        sizes = conn.execute(
            "SELECT pg_size_pretty(pg_total_relation_size('tickwork.jobs')),"
            " pg_size_pretty(pg_total_relation_size('tickwork.schedules'))"
        ).fetchone()
        assert sizes is not None
        print(f"  tickwork.jobs {sizes[0]}, tickwork.schedules {sizes[1]} (with indexes)")


def measure(url: str) -> list[tuple[str, float, dict[str, float]]]:
    """Apply each migration after FILLED_AT with the probes running: its time, and the longest
    time a statement of each probe was in flight while it ran."""
    probes = {name: Probe(url, statement) for name, statement in PROBES.items()}
    threads = [threading.Thread(target=p.run, daemon=True) for p in probes.values()]
    for thread in threads:
        thread.start()
    windows = []
    try:
        for migration in migrate.available():
            if migration.version <= FILLED_AT:
                continue
            started = time.monotonic()
            migrate.apply(url, until=migration.version)
            windows.append((migration.name, started, time.monotonic()))
            print(f"  {migration.name}: {windows[-1][2] - started:.2f} s", flush=True)
    finally:
        for probe in probes.values():
            probe.stop.set()
        for thread in threads:
            thread.join()
    for name, start, end in windows:
        for probe_name, probe in probes.items():
            if aborted := probe.deadlocked(start, end):
                print(f"  {name}: {aborted} {probe_name} statement(s) aborted by a deadlock")
    return [
        (name, end - start, {n: p.held_up(start, end) for n, p in probes.items()})
        for name, start, end in windows
    ]


def report(results: list[tuple[str, float, dict[str, float]]]) -> None:
    print()
    print(f"{'migration':<46} {'time':>8} " + " ".join(f"{n:>8}" for n in PROBES))
    print(f"{'':<46} {'':>8} " + " ".join(f"{'held up':>8}" for _ in PROBES))
    folded = []
    for name, took, held in results:
        if took < FOLD and max(held.values()) < FOLD:
            folded.append(name[:4])
            continue
        print(
            f"{name:<46} {took:>7.2f}s " + " ".join(f"{held[n]:>7.2f}s" for n in PROBES),
            flush=True,
        )
    if folded:
        print(f"under {FOLD:g} s, no probe held up past {FOLD:g} s: {', '.join(folded)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=1_000_000)
    parser.add_argument("--jobs", type=int, default=10_000_000)
    servers.add_arguments(parser)
    args = parser.parse_args()
    with servers.database_server(args.database_url) as url:
        migrate.apply(url, until=FILLED_AT)
        print(f"filling {args.schedules:,} schedules and {args.jobs:,} jobs", flush=True)
        started = time.monotonic()
        fill(url, args.schedules, args.jobs)
        print(f"  filled in {time.monotonic() - started:.0f} s", flush=True)
        report(measure(url))


if __name__ == "__main__":
    main()
