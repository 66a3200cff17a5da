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
  for the scope's jobs of that kind (~480 ms at 1,000,000 jobs: bench/admin.py);
* the claim beside many namespaces' waiting jobs of a kind it does not serve: a walk per
  queue and kind served through jobs_tenant_kind_idx (migration 0029), not a read of each of
  them (1,100,000 buffers, 5.2 s a claim at 1,000,000 of them: bench/firing.py), also with
  statistics taken before a bulk enqueue.
* the claim prepared on a new table, as a worker starting on one keeps its generic plan: when
  it finds nothing, its UPDATE reads no row of the grown table.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.support import explain
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


def _prepare(conn: psycopg.Connection[Any], op: store.Op[Any], name: str) -> sql.Composable:
    """PREPARE ``op``'s statement as ``name``, as a worker's prepared statement; returns the
    values to EXECUTE it with."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match[1] not in names:
            names.append(match[1])
        return f"${names.index(match[1]) + 1}"

    text = re.sub(r"%\((\w+)\)[sb]", number, queries.QUERIES[op.query]).replace("%%", "%")
    conn.execute(f"PREPARE {name} AS " + text)
    return sql.SQL(", ").join(sql.Literal(op.params[n]) for n in names)


def _generic_plan(conn: psycopg.Connection[Any], op: store.Op[Any]) -> str:
    """The plan of ``op``'s statement prepared, as a worker's prepared statement runs once
    PostgreSQL keeps its generic plan (planned without the parameters' values)."""
    values = _prepare(conn, op, "generic")
    try:
        conn.execute("SET plan_cache_mode = force_generic_plan")
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


def test_a_claim_reads_no_waiting_job_of_a_kind_it_does_not_serve(
    conn: psycopg.Connection[Any],
) -> None:
    """Fair claiming walks the tenants per queue and kind served (jobs_tenant_kind_idx,
    migration 0029): 30 namespaces' 6,000 waiting jobs of a kind this claimer does not serve
    (firing's jobs beside the steps every worker serves) cost it a few descents, not a read of
    each (before: every one of them, twice). Measured in buffers, custom and generic plan."""
    conn.execute(
        "INSERT INTO tickwork.jobs (kind, schedule_namespace, schedule_name, run_at)"
        " SELECT 'not.served', 'ns-' || n % 30, 's' || n, now() - n * interval '1 ms'"
        " FROM generate_series(1, 6000) AS n"
    )
    conn.execute("INSERT INTO tickwork.jobs (kind) VALUES (%s)", (KIND,))
    conn.execute("VACUUM ANALYZE tickwork.jobs")
    op = jobs_db.claim_jobs("w", ["default"], {KIND: 1}, 10, 30, None)
    custom = explain.op_buffers(conn, op)
    assert custom < 300, custom
    assert "jobs_tenant_kind_idx" in _plan(conn, op)
    assert "jobs_tenant_kind_idx" in _generic_plan(conn, op)
    # A tenant with waiting jobs of two kinds served takes its share from each kind's range.
    two = jobs_db.claim_jobs("w", ["default"], {KIND: 1, "not.served": 1}, 10, 30, None)
    assert "jobs_tenant_idx" not in _generic_plan(conn, two)


@pytest.mark.parametrize("kinds", [[KIND, "tickwork.steps"], ["tickwork.steps"]])
def test_a_claim_after_a_bulk_enqueue_reads_only_the_jobs_it_takes(
    conn: psycopg.Connection[Any], kinds: list[str]
) -> None:
    """Statistics from before a bulk enqueue (the table analysed empty, as autovacuum leaves a
    drained queue, then filled in one transaction, as bench/peers.py does) give every
    condition its default selectivity and every scan one row: the planner once took
    jobs_tenant_idx and a sort for the walk per kind, reading the whole queue twice a claim.
    Here 20,000 jobs of a kind not served wait in 40 namespaces beside 5,000 of the kind served
    (a worker serving its kind and the workflow steps, as every worker does; or the steps
    alone, like firing's workers): a claim of 50 reads about what it takes, in buffers and in
    rows read from the jobs table."""
    conn.execute("VACUUM ANALYZE tickwork.jobs")
    with conn.transaction():
        conn.execute(
            "INSERT INTO tickwork.jobs (kind, schedule_namespace, schedule_name, run_at)"
            " SELECT 'not.served', 'ns-' || n % 40, 's' || n, now() - n * interval '1 ms'"
            " FROM generate_series(1, 20000) AS n"
        )
        conn.execute(
            "INSERT INTO tickwork.jobs (kind) SELECT %s FROM generate_series(1, 5000)", (KIND,)
        )
    op = jobs_db.claim_jobs("w", ["default"], dict.fromkeys(kinds, 1), 50, 30, None)
    statement = "EXPLAIN (ANALYZE, BUFFERS) " + queries.QUERIES[op.query]
    with conn.transaction(force_rollback=True):
        plan = "\n".join(str(row[0]) for row in conn.execute(statement, op.params).fetchall())
    assert "jobs_tenant_idx" not in plan, plan
    read = [
        int(rows) * int(loops)
        for rows, loops in re.findall(
            r"(?:Index|Seq|Bitmap Heap) Scan (?:using \w+ )?on jobs \w+ .*?"
            r"actual time=\S+ rows=(\d+) loops=(\d+)",
            plan,
        )
    ]
    assert read, plan
    taken = 50 if KIND in kinds else 0
    assert sum(read) <= taken + 10, plan
    top = next(line for line in plan.splitlines() if "Buffers:" in line)
    assert sum(int(n) for n in re.findall(r"(?:hit|read)=(\d+)", top)) < 1000, plan


def test_available_is_the_first_job_status(conn: psycopg.Connection[Any]) -> None:
    """jobs_tenant_kind_idx and the claim say "status <= 'available'" for "status =
    'available'" (migration 0029): a label added before it would change what they mean."""
    labels = conn.execute(
        "SELECT enumlabel FROM pg_enum WHERE enumtypid = 'tickwork.job_status'::regtype"
        " ORDER BY enumsortorder"
    ).fetchall()
    assert labels[0] == ("available",)


def test_a_claim_planned_on_a_new_table_reads_none_of_it_when_it_finds_nothing(
    conn: psycopg.Connection[Any],
) -> None:
    """A worker prepares its claim (docs/deployment.md, Prepared statements), and PostgreSQL
    keeps the generic plan it made then. Made on a new table (never vacuumed: the planner
    takes it for 10 pages), that plan reads the table rather than look the chosen rows up by
    version, so a claim that found nothing still read the whole table for its UPDATE of no
    rows: beside 1,000,000 fired jobs of a kind the firing workers do not serve, 3,000
    buffers and 20-30 ms a claim, 13-17 claims a second (bench/firing.py). Here the plan is
    made on the new table, then 20,000 jobs of another kind arrive without an ANALYZE."""
    op = jobs_db.claim_jobs("w", ["default"], {"tickwork.steps": 1}, 10, 30, None)
    values = _prepare(conn, op, "claim")
    conn.execute("SET plan_cache_mode = force_generic_plan")
    with conn.transaction(force_rollback=True):
        conn.execute(sql.SQL("EXECUTE claim ({})").format(values))  # the generic plan, kept
    conn.execute(
        "INSERT INTO tickwork.jobs (kind, schedule_namespace, schedule_name, run_at)"
        " SELECT 'not.served', 'ns-' || n % 40, 's' || n, now() - n * interval '1 ms'"
        " FROM generate_series(1, 20000) AS n"
    )
    statement = sql.SQL("EXPLAIN (ANALYZE, BUFFERS) EXECUTE claim ({})").format(values)
    assert explain.buffers(conn, statement, None) < 300  # before: 650, the table read whole
