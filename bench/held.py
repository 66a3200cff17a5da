"""What the flow rules' surfaces cost at a large backlog: the fleet gauge duty's held-jobs
query (tickwork_fleet_jobs_held, db/sql/flow_rules.sql rule_held_jobs), the rules listing it
also runs, and KEDA's tickwork.keda_due_work (migration 0022), next to the duty's existing
per-queue count of open jobs (gauge_jobs) and KEDA's function before migration 0022 (which
counts what limits hold) for scale.

    python bench/held.py                      # 100,000 due jobs
    python bench/held.py --jobs 1000000

--jobs due waiting jobs over 10 queues, 10 kinds and 10 schedule namespaces (and jobs from
code), a customer of 100 in each payload; 50 running jobs. Each query runs --runs times per
case; prints the median and the p95 in ms. Cases: no rules; rules that hold nothing (room
left); rules that hold: queue q0 at its max_running, kind k1 at its, namespace ns2 at its,
queue q3's rate used up, queue q4's rate keyed by customer with 10 customers used up.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import measure
import psycopg
import servers

from tickwork.db import flow_rules as rules_db
from tickwork.db import jobs as jobs_db
from tickwork.db import migrate, store

MIGRATIONS = Path(migrate.__file__).parent / "migrations"


def _fill(conn: psycopg.Connection, jobs: int) -> None:
    conn.execute(
        "INSERT INTO tickwork.jobs (kind, queue, schedule_namespace, schedule_name, payload,"
        " run_at)"
        " SELECT 'k' || n %% 10, 'q' || (n / 7) %% 10,"
        " CASE WHEN n %% 11 < 10 THEN 'ns' || n %% 11 END,"
        " CASE WHEN n %% 11 < 10 THEN 's' END,"
        " jsonb_build_object('customer', 'c' || n %% 100),"
        " now() - interval '1 hour' + n * interval '1 ms'"
        " FROM generate_series(1, %s) AS n",
        (jobs,),
    )
    conn.execute(
        "INSERT INTO tickwork.jobs (kind, queue, schedule_namespace, schedule_name, status,"
        " attempt, picked_by, started_at, lease_expires_at, run_at)"
        " SELECT 'k' || n % 10, 'q' || n % 10, 'ns' || n % 10, 's', 'running', 1, 'b',"
        " now(), now() + interval '1 hour', now() - interval '2 hours'"
        " FROM generate_series(1, 50) AS n"
    )
    conn.execute("VACUUM ANALYZE tickwork.jobs")


def _rules(conn: psycopg.Connection, holding: bool) -> None:
    conn.execute("DELETE FROM tickwork.flow_rules")
    most = 5 if holding else 1000
    rate = 5 if holding else 100000
    conn.execute(
        "INSERT INTO tickwork.flow_rules"
        " (scope, name, max_running, rate, period_seconds, rate_key, set_by, set_at) VALUES"
        " ('queue', 'q0', %(most)s, NULL, NULL, NULL, 'b', now()),"
        " ('kind', 'k1', %(most)s, NULL, NULL, NULL, 'b', now()),"
        " ('namespace', 'ns2', %(most)s, NULL, NULL, NULL, 'b', now()),"
        " ('queue', 'q3', NULL, %(rate)s, 3600, NULL, 'b', now()),"
        " ('queue', 'q4', NULL, %(rate)s, 3600, 'customer', 'b', now())",
        {"most": most, "rate": rate},
    )
    conn.execute(
        "INSERT INTO tickwork.flow_starts (rule_id, key, started_at, starts)"
        " SELECT id, '', now(), 5 FROM tickwork.flow_rules WHERE name = 'q3'"
        " UNION ALL SELECT id, 'c' || c, now(), 5"
        " FROM tickwork.flow_rules, generate_series(1, 10) c WHERE name = 'q4'"
    )
    conn.execute("ANALYZE tickwork.flow_rules, tickwork.flow_starts")


def _time(runs: int, query: Callable[[], object]) -> str:
    query()  # warm
    ms = []
    for _ in range(runs):
        started = time.perf_counter()
        query()
        ms.append((time.perf_counter() - started) * 1000)
    ms.sort()
    return f"median {statistics.median(ms):.1f} ms, p95 {ms[int(0.95 * (len(ms) - 1))]:.1f} ms"


def run(url: str, jobs: int, runs: int) -> None:
    migrate.apply(url)
    with measure.worker_connection(url) as conn:
        _fill(conn, jobs)
        conn.execute("SET jit = off")  # as the gauge duty's transaction (KEDA's function: its own)
        before = (MIGRATIONS / "0020_pauses.sql").read_text()  # KEDA's function before 0022
        before = before[before.index("CREATE OR REPLACE FUNCTION") :]
        conn.execute(before.replace("tickwork.keda_due_work(", "pg_temp.keda_before(", 1))
        keda = "SELECT tickwork.keda_due_work(NULL, NULL, 0)"
        keda_before = "SELECT pg_temp.keda_before(NULL, NULL, 0)"
        for case in ("no rules", "rules with room", "rules holding"):
            if case == "no rules":
                conn.execute("DELETE FROM tickwork.flow_rules")
            else:
                _rules(conn, case == "rules holding")
            held = store.run(conn, rules_db.held_jobs(None))
            due = conn.execute(keda).fetchone()
            queries: list[tuple[str, Callable[[], object]]] = [
                ("held jobs query", lambda: store.run(conn, rules_db.held_jobs(None))),
                ("rules listing", lambda: store.run(conn, rules_db.list_rules())),
                ("keda_due_work", lambda: conn.execute(keda).fetchone()),
                ("keda before 0022", lambda: conn.execute(keda_before).fetchone()),
                ("gauge_jobs", lambda: store.run(conn, jobs_db.gauge_jobs(None))),
            ]
            print(f"{jobs:,} due jobs, {case}:")
            for name, query in queries:
                print(f"  {name + ':':18}{_time(runs, query)}")
            print(
                f"  {sum(h.count for h in held):,} held in {len(held)} series;"
                f" KEDA counts {due[0] if due else None:,}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    servers.add_arguments(parser)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    with servers.database_server(args.database_url) as url:
        run(url, args.jobs, args.runs)


if __name__ == "__main__":
    main()
