"""Big history: claim, completion and firing latency with millions of finished jobs kept.

    python bench/history.py                       # 10,000,000 finished jobs
    python bench/history.py --finished 1000000    # a smaller history

Measures twice on one database: first with an empty history, then after building --finished
finished jobs with ``INSERT … SELECT generate_series`` (not by running them; in statements
of a million rows) and ``VACUUM ANALYZE``. The history: 90 % succeeded, 7 % dead, 3 %
cancelled; half of them jobs of 1,000 schedules in 10 namespaces (each occurrence once), half
one-off jobs; finished over the last 7 days less an hour, so the workers' retention (7 days by
default) deletes none of them during the run. Each time it measures:

- claim and completion latency: --backlog available jobs are queued and claimed --batch at
  a time, each claim committed, until --claims claims are timed (queued again when drained);
  the claim statement timed from the client: p50, p99, max; and each batch claimed recorded
  succeeded (the worker's completion statement, committed) timed the same way;
- firing latency: --schedules cron schedules due at the same second, fired by --processes
  worker processes, as ``bench/firing.py --schedules`` measures it: lag from due to commit
  p50/p99/max and occurrences per second;
- the jobs table's size and each of its indexes'.

and prints both side by side. With ``--statements`` (the private server then preloads
pg_stat_statements), it also prints the statements that took the most database time during
each firing measurement. Runs on a private PostgreSQL with its default durability and
``track_commit_timestamp`` on (or a database of its own on ``--database-url``; see
servers.py).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import Any

import firing
import measure
import psycopg
import servers

from tickwork.db import jobs as jobs_db
from tickwork.db import migrate, store

KIND = "bench.history"
CHUNK = 1_000_000
"""History rows inserted per statement."""
HISTORY_SCHEDULES = 1000
HISTORY_NAMESPACES = 10

_BUILD = """
INSERT INTO tickwork.jobs (
    kind, queue, payload, priority, run_at, status, attempt, max_attempts, schedule_namespace,
    schedule_name, occurrence_at, picked_by, last_error, version, created_at, started_at,
    finished_at)
SELECT %(kind)s, 'default', '{}', 0, h.at,
       CASE WHEN h.n %% 100 < 90 THEN 'succeeded'
            WHEN h.n %% 100 < 97 THEN 'dead' ELSE 'cancelled' END::tickwork.job_status,
       CASE WHEN h.n %% 100 < 90 THEN 1 WHEN h.n %% 100 < 97 THEN 3 ELSE 0 END, 3,
       CASE WHEN h.scheduled THEN 'history-' || (h.n / 2 %% %(namespaces)s) END,
       CASE WHEN h.scheduled THEN 's' || (h.n / 2 %% %(schedules)s) END,
       CASE WHEN h.scheduled THEN h.at END,
       'history-worker',
       CASE WHEN h.n %% 100 BETWEEN 90 AND 96 THEN 'RuntimeError: boom' END,
       3, h.at, h.at + interval '100 ms', h.at + interval '1 s'
FROM (SELECT n, n %% 2 = 0 AS scheduled,
             now() - interval '7 days' + interval '1 hour'
                 + n * (interval '7 days' - interval '2 hours') / %(total)s::bigint AS at
      FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS n) AS h
"""
"""Rows first..last of a history of total: run at a steady pace over the last 7 days less an
hour, each finished a second after; schedule jobs (even n) spread round-robin over the
schedules, whose names and namespaces are fixed by n, so each occurrence is unique."""

_SIZES = """
SELECT 'table' AS name, pg_table_size('tickwork.jobs') AS bytes
UNION ALL
SELECT indexrelid::regclass::text, pg_relation_size(indexrelid)
FROM pg_index WHERE indrelid = 'tickwork.jobs'::regclass
ORDER BY 1
"""


@dataclass(frozen=True)
class Figures:
    finished: int
    claim_ms: list[float]
    complete_ms: list[float]
    cron: firing.CronRun
    sizes: dict[str, int]
    statements: list[measure.Statement]
    """While firing: the statements that took the most time (with ``--statements``)."""


def _claims(
    conn: psycopg.Connection[Any], backlog: int, batch: int, claims: int
) -> tuple[list[float], list[float]]:
    """Seconds of ``claims`` committed claims of ``batch`` jobs on a backlog of ``backlog``
    available jobs (queued again when drained), and of the completions of their jobs; the
    jobs queued are deleted after."""
    op = measure.claim_op("bench-history", KIND, batch)
    times: list[float] = []
    completions: list[float] = []
    queued: list[int] = []
    while len(times) < claims:
        queued += [
            row[0]
            for row in conn.execute(
                "INSERT INTO tickwork.jobs (kind, run_at)"
                " SELECT %s, now() - interval '1 second' FROM generate_series(1, %s)"
                " RETURNING id",
                (KIND, backlog),
            )
        ]
        while len(times) < claims:
            took, got = measure.timed_claim(conn, op, keep=True)
            if not got:
                break
            times.append(took)
            started = time.perf_counter()
            with conn.transaction():
                done = store.run(conn, jobs_db.complete_jobs(got, None))
            completions.append(time.perf_counter() - started)
            assert len(done) == len(got), "every job claimed was recorded succeeded"
    conn.execute("DELETE FROM tickwork.jobs WHERE id = ANY(%s::bigint[])", (queued,))
    return times, completions


def _sizes(conn: psycopg.Connection[Any]) -> dict[str, int]:
    return {name: int(size) for name, size in conn.execute(_SIZES).fetchall()}


def _measure(url: str, finished: int, args: argparse.Namespace) -> Figures:
    with measure.worker_connection(url) as conn:
        conn.execute("VACUUM ANALYZE tickwork.jobs")
        claim, complete = _claims(conn, args.backlog, args.batch, args.claims)
        sizes = _sizes(conn)
        statements = args.statements and measure.statements_enable(conn)
        before = measure.statements(conn) if statements else {}
        cron = firing.measure_cron(url, args.schedules, args.processes, quiet=True)
        after = measure.statements(conn) if statements else {}
        spent = measure.statements_between(before, after, 8)
    return Figures(
        finished, [1000 * t for t in claim], [1000 * t for t in complete], cron, sizes, spent
    )


def _build(url: str, total: int) -> None:
    """``total`` finished jobs, in statements of CHUNK rows, then VACUUM ANALYZE."""
    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        for first in range(1, total + 1, CHUNK):
            last = min(total, first + CHUNK - 1)
            conn.execute(
                _BUILD,
                {
                    "kind": KIND + ".done",
                    "first": first,
                    "last": last,
                    "total": total,
                    "schedules": HISTORY_SCHEDULES,
                    "namespaces": HISTORY_NAMESPACES,
                },
            )
            print(f"  built {last:,} of {total:,} ({time.perf_counter() - started:.0f} s)")
        inserted = time.perf_counter()
        conn.execute("VACUUM ANALYZE tickwork.jobs")
    print(
        f"  history: {total:,} finished jobs inserted in {inserted - started:.0f} s, "
        f"VACUUM ANALYZE {time.perf_counter() - inserted:.0f} s"
    )


def _mb(size: int | None) -> str:
    return f"{size / 2**20:,.1f} MB" if size is not None else "-"


def report(empty: Figures, full: Figures, args: argparse.Namespace) -> None:
    def row(label: str, left: str, right: str) -> None:
        print(f"{label:44} {left:>16} {right:>18}")

    def ms(values: list[float], q: float) -> str:
        return f"{measure.percentile(values, q):.2f} ms"

    print()
    row("", "empty history", f"{full.finished:,} finished")
    for q, name in ((0.5, "p50"), (0.99, "p99"), (1.0, "max")):
        row(
            f"claim {name} ({args.claims} claims of {args.batch}, {args.backlog:,} queued)",
            ms(empty.claim_ms, q),
            ms(full.claim_ms, q),
        )
    for q, name in ((0.5, "p50"), (0.99, "p99"), (1.0, "max")):
        row(
            f"completion {name} (each batch claimed)",
            ms(empty.complete_ms, q),
            ms(full.complete_ms, q),
        )
    for label, pick in (
        ("firing lag p50 (due -> commit)", lambda f: f"{f.cron.figures.p50_ms:.1f} ms"),
        ("firing lag p99", lambda f: f"{f.cron.figures.p99_ms:.1f} ms"),
        ("firing lag max", lambda f: f"{f.cron.figures.max_ms:.1f} ms"),
        ("firing: last job visible after due", lambda f: f"{f.cron.visible_after:.3f} s"),
        ("firing rate (occurrences/s)", lambda f: f"{f.cron.rate:,.0f}"),
        (
            f"fired of {args.schedules:,} due (P={args.processes})",
            lambda f: f"{f.cron.fired:,}",
        ),
    ):
        row(label, pick(empty), pick(full))
    for name in sorted(set(empty.sizes) | set(full.sizes), key=lambda n: (n != "table", n)):
        label = "jobs table" if name == "table" else f"  index {name.removeprefix('tickwork.')}"
        row(label, _mb(empty.sizes.get(name)), _mb(full.sizes.get(name)))
    for figures in (empty, full):
        if figures.statements:
            print(f"while firing, {figures.finished:,} finished: total ms, calls, statement")
        for s in figures.statements:
            print(f"  {s.ms:10.1f}  {s.calls:7,}  {s.name}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--finished", type=int, default=10_000_000, help="finished jobs kept")
    parser.add_argument("--backlog", type=int, default=1000, help="available jobs queued")
    parser.add_argument("--batch", type=int, default=10, help="jobs per claim")
    parser.add_argument("--claims", type=int, default=2000, help="claims timed")
    parser.add_argument("--schedules", type=int, default=1000, help="schedules due at once")
    parser.add_argument("--processes", type=int, default=2, help="worker processes firing")
    parser.add_argument(
        "--statements",
        action="store_true",
        help="print the statements taking the most time while firing (pg_stat_statements)",
    )
    servers.add_arguments(parser)
    args = parser.parse_args()
    for name in ("finished", "backlog", "batch", "claims", "schedules", "processes"):
        if getattr(args, name) < 1:
            parser.error(f"--{name}: must be at least 1")
    with servers.database_server(
        args.database_url, track_commit_timestamp="on", **measure.preload(args.statements)
    ) as url:
        migrate.apply(url)
        print(f"history: claim and firing latency, empty vs {args.finished:,} finished jobs")
        print("  measuring with an empty history")
        empty = _measure(url, 0, args)
        _build(url, args.finished)
        print(f"  measuring with {args.finished:,} finished jobs")
        full = _measure(url, args.finished, args)
    report(empty, full, args)


if __name__ == "__main__":
    main()
