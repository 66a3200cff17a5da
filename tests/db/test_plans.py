"""Plans, not times: the statements that slowed down as the jobs table grew read it through
their indexes. A real PostgreSQL holds 30,000 jobs (finished ones built in SQL, 500 claimed by
the real claim, vacuumed and analysed as autovacuum leaves a table); each statement's plan,
for the parameters a worker sends (no prepared statements, so a plan per call), must not read
the whole table. Their costs are measured by bench/peers.py and bench/history.py; a plan that
reads the table is what made them slow:

* the completion, heartbeat and hand-back of a batch of 500: seeing 500 ids, the planner
  hashed a seq scan of the table (7 ms a batch at 30,000 jobs instead of 3);
* the claim-floor refresh, the orphaned-jobs gauge and the console's queue figures: an
  ``IN ('available', 'running')`` list matched none of the partial indexes (2 s per refresh
  at 10,000,000 finished jobs);
* the dead jobs counted per queue (gauge and console): read from the index alone
  (migration 0015), not from every dead job's row;
* the operator's open jobs of a namespace;
* the statuses of the jobs of a page of labelled Kubernetes Jobs (the container-jobs
  reconciler);
* the claim with a queue paused, and the queue listing with its paused state;
* the console's waiting jobs per queue and namespace with their oldest wait: through the
  available jobs' partial index (jobs_claim_idx), scoped or not;
* the console's jobs filtered by kind for a scoped reader: a walk per namespace of the scope
  through jobs_namespace_kind_idx (migration 0024), not the whole table newest first looking
  for the scope's jobs of that kind (~480 ms at 1,000,000 jobs: bench/admin.py).
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tickwork.db import admin as admin_db
from tickwork.db import claim_floors as claim_floors_db
from tickwork.db import jobs as jobs_db
from tickwork.db import pauses as pauses_db
from tickwork.db import queries, store
from tickwork.model import JobStatus

KIND = "t.plans"
FINISHED = 29_000
BATCH = 500

_BUILD = """
INSERT INTO tickwork.jobs (kind, status, attempt, max_attempts, created_at, started_at,
                           finished_at, schedule_namespace, schedule_name, occurrence_at)
SELECT %(kind)s,
       CASE WHEN i %% 100 < 90 THEN 'succeeded' WHEN i %% 100 < 97 THEN 'dead'
            ELSE 'cancelled' END::tickwork.job_status,
       1, 1, now() - interval '1 day', now() - interval '1 day', now() - interval '1 day',
       CASE WHEN i %% 2 = 0 THEN 'ns' END, CASE WHEN i %% 2 = 0 THEN 's' || i %% 100 END,
       CASE WHEN i %% 2 = 0 THEN now() - interval '1 day' - i * interval '1 second' END
FROM generate_series(1, %(finished)s) AS i
"""


def _plan(conn: psycopg.Connection[Any], op: store.Op[Any]) -> str:
    rows = conn.execute("EXPLAIN " + queries.QUERIES[op.query], op.params).fetchall()
    return "\n".join(str(row[0]) for row in rows)


def _generic_plan(conn: psycopg.Connection[Any], op: store.Op[Any]) -> str:
    """The plan of ``op``'s statement prepared, as a worker's prepared statement runs once
    PostgreSQL keeps its generic plan (planned without the parameters' values)."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match[1] not in names:
            names.append(match[1])
        return f"${names.index(match[1]) + 1}"

    text = re.sub(r"%\((\w+)\)[sb]", number, queries.QUERIES[op.query]).replace("%%", "%")
    conn.execute("PREPARE generic AS " + text)
    try:
        conn.execute("SET plan_cache_mode = force_generic_plan")
        values = sql.SQL(", ").join(sql.Literal(op.params[name]) for name in names)
        rows = conn.execute(sql.SQL("EXPLAIN EXECUTE generic ({})").format(values)).fetchall()
    finally:
        conn.execute("RESET plan_cache_mode")
        conn.execute("DEALLOCATE generic")
    return "\n".join(str(row[0]) for row in rows)


@pytest.fixture
def table(conn: psycopg.Connection[Any]) -> list[Any]:
    """The 30,000 jobs; returns the 500 claimed (running) ones."""
    conn.execute(_BUILD, {"kind": KIND, "finished": FINISHED})
    conn.execute(
        "INSERT INTO tickwork.jobs (kind) SELECT %s FROM generate_series(1, %s)",
        (KIND, 2 * BATCH),
    )
    with conn.transaction():
        running = store.run(conn, jobs_db.claim_jobs("w", ["default"], {KIND: 1}, BATCH, 30, None))
    assert len(running) == BATCH
    conn.execute("VACUUM ANALYZE tickwork.jobs")
    return running


def test_no_statement_reads_the_whole_jobs_table(
    conn: psycopg.Connection[Any], table: list[Any]
) -> None:
    ops: dict[str, store.Op[Any]] = {
        "completion": jobs_db.complete_jobs(table, None),
        "heartbeat": jobs_db.extend_leases(table, 30.0, None),
        "hand-back": jobs_db.hand_back_jobs(table, None),
        "claim floors": claim_floors_db.refresh_claim_floors(1.0, 60.0, None),
        "orphaned gauge": jobs_db.gauge_orphaned_jobs(60.0, None),
        "jobs gauge": jobs_db.gauge_jobs(None),
        "console queues": admin_db.queues(3600.0, 100, None, None),
        "console queue waits": admin_db.queue_waits(100, None, None),
        "console queue waits, scoped": admin_db.queue_waits(100, None, ["ns"]),
        "console jobs by kind, scoped": admin_db.jobs(
            admin_db.JobFilter(kind="absent.kind"),
            before=None,
            limit=51,
            error_chars=200,
            scope={"ns", "other"},
        ),
        "console jobs by kind and status, scoped": admin_db.jobs(
            admin_db.JobFilter(kind="absent.kind", status=JobStatus.DEAD),
            before=None,
            limit=51,
            error_chars=200,
            scope={"ns", "other"},
        ),
        "operator's open jobs": jobs_db.open_job_list(["ns"], 5),
        "container Jobs' statuses": jobs_db.job_statuses([job.id for job in table]),
    }
    plans = {name: _plan(conn, op) for name, op in ops.items()}
    # With a queue paused (migration 0020) the claim still walks its index.
    conn.execute(
        "INSERT INTO tickwork.pauses (scope, name, paused_by, paused_at) "
        "VALUES ('queue', 'held', 'test', now())"
    )
    claim = jobs_db.claim_jobs("w", ["default", "held"], {KIND: 1}, BATCH, 30, None)
    plans["claim, a queue paused"] = _plan(conn, claim)
    plans["queue listing"] = _plan(conn, pauses_db.list_queues())
    whole = {name: plan for name, plan in plans.items() if "Seq Scan on jobs" in plan}
    assert not whole, "\n\n".join(f"{name}:\n{plan}" for name, plan in whole.items())
    assert "jobs_pkey" in plans["completion"]
    assert "jobs_status_id_idx" in plans["jobs gauge"]
    assert "jobs_claim_idx" in plans["claim, a queue paused"]
    assert "jobs_claim_idx" in plans["console queue waits"]
    assert "jobs_claim_idx" in plans["console queue waits, scoped"]
    assert "jobs_namespace_kind_idx" in plans["console jobs by kind, scoped"]


def test_no_generic_plan_of_a_worker_statement_reads_the_whole_jobs_table(
    conn: psycopg.Connection[Any], table: list[Any]
) -> None:
    """A worker on a direct connection prepares its statements (--prepared-statements), and
    PostgreSQL runs a prepared statement's generic plan once that costs no more than its
    custom ones: that plan, too, goes through the indexes."""
    conn.execute("INSERT INTO tickwork.jobs (kind) SELECT %s FROM generate_series(1, 10)", (KIND,))
    conn.execute("VACUUM ANALYZE tickwork.jobs")
    ops: dict[str, store.Op[Any]] = {
        "claim": jobs_db.claim_jobs("w", ["default"], {KIND: 1}, BATCH, 30, None),
        "completion": jobs_db.complete_jobs(table, None),
        "heartbeat": jobs_db.extend_leases(table, 30.0, None),
        "hand-back": jobs_db.hand_back_jobs(table, None),
    }
    plans = {name: _generic_plan(conn, op) for name, op in ops.items()}
    whole = {name: plan for name, plan in plans.items() if "Seq Scan on jobs" in plan}
    assert not whole, "\n\n".join(f"{name}:\n{plan}" for name, plan in whole.items())
    assert "jobs_pkey" in plans["completion"]
    assert "jobs_claim_idx" in plans["claim"]
