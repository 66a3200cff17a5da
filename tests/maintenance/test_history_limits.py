"""Retention's history limits on a real PostgreSQL: each schedule keeps exactly its newest
``successfulJobsHistoryLimit`` succeeded jobs and newest ``failedJobsHistoryLimit`` dead or
cancelled ones (newest: finished_at, then id), beside the age rule; one-off jobs and other
schedules are untouched; only schedules queued since the last pass are read; a sync lowering a
limit trims at once; the operator's lastJob survives its job's deletion; two retention
processes racing while jobs keep ending never delete a job that had fewer newer ones than the
limit; and the console's "last failure" still reads an index (EXPLAIN).

Jobs end through the real outcome statements (claim, complete, mark dead, cancel) at pinned
instants, so the trigger that queues their schedules is the one every outcome goes through."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tickwork
from tests.support.forking import process_context
from tests.support.helpers import T0, claim, scalar
from tickwork.db import jobs as jobs_db
from tickwork.db import migrate, store
from tickwork.db.queries import QUERIES
from tickwork.maintenance.retention import Retention, RetentionConfig
from tickwork.model import JobId, JobStatus
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.options import JobTemplate

KIND = "h.job"
LATER = "h.later"
"""Jobs to be cancelled while available carry this kind, so the claims leave them alone."""
NO_AGE = RetentionConfig(age_seconds=100 * 365 * 86400.0)
"""The age rule deletes nothing in these tests unless they say so."""

SUCCEEDED, DEAD, CANCELLED = JobStatus.SUCCEEDED, JobStatus.DEAD, JobStatus.CANCELLED


@dataclass(frozen=True)
class Ended:
    """A job to make end: its schedule (None: a one-off job), outcome and finish instant."""

    schedule: tuple[str, str] | None
    outcome: JobStatus
    seconds: int


def schedule(name: str, succeeded: int = 3, failed: int = 1) -> ScheduleDefinition:
    return ScheduleDefinition(
        name=name,
        job=JobTemplate(kind=KIND),
        every=timedelta(hours=1),
        successful_jobs_history_limit=succeeded,
        failed_jobs_history_limit=failed,
    )


def end_jobs(conn: psycopg.Connection[Any], ended: Sequence[Ended]) -> list[int]:
    """Create one job per entry and make it end as said, at T0 + its seconds, through the
    outcome statements workers and operators use; returns the ids in entry order."""
    ids: list[int] = []
    with conn.transaction():
        for entry in ended:
            namespace, name = entry.schedule or (None, None)
            kind = LATER if entry.outcome is CANCELLED else KIND
            ids.append(
                scalar(
                    conn,
                    "INSERT INTO tickwork.jobs (kind, schedule_namespace, schedule_name, run_at)"
                    " VALUES (%s, %s, %s, %s) RETURNING id",
                    (kind, namespace, name, T0 - timedelta(days=1)),
                )
            )
    claimed = {job.id: job for job in claim(conn, kinds=[KIND], limit=len(ended) + 1)}
    for job_id, entry in sorted(zip(ids, ended, strict=True), key=lambda e: e[1].seconds):
        now = T0 + timedelta(seconds=entry.seconds)
        if entry.outcome is SUCCEEDED:
            done = store.run(conn, jobs_db.complete_jobs([claimed[JobId(job_id)]], now))
            assert done == {job_id}
        elif entry.outcome is DEAD:
            assert store.run(conn, jobs_db.mark_job_dead(claimed[JobId(job_id)], "boom", now))
        else:
            assert store.run(conn, jobs_db.cancel_job(job_id, now))
    conn.commit()
    return ids


def expected_kept(ids: Sequence[int], ended: Sequence[Ended], limits: dict[Any, Any]) -> set[int]:
    """The jobs the history limits keep: per schedule, the newest ``succeeded`` succeeded and
    newest ``failed`` dead or cancelled ones (finished_at, then id); every one-off job."""
    groups: dict[Any, list[tuple[int, int]]] = {}
    kept: set[int] = set()
    for job_id, entry in zip(ids, ended, strict=True):
        if entry.schedule is None:
            kept.add(job_id)
            continue
        failed = entry.outcome is not SUCCEEDED
        groups.setdefault((entry.schedule, failed), []).append((entry.seconds, job_id))
    for (key, failed), members in groups.items():
        limit = limits[key][1 if failed else 0]
        kept.update(job_id for _, job_id in sorted(members, reverse=True)[:limit])
    return kept


def job_ids(conn: psycopg.Connection[Any]) -> set[int]:
    return {row[0] for row in conn.execute("SELECT id FROM tickwork.jobs")}


def queued(conn: psycopg.Connection[Any]) -> set[tuple[str, str]]:
    rows = conn.execute("SELECT namespace, name FROM tickwork.schedule_history_pending")
    return {(row[0], row[1]) for row in rows}


def retain(database_url: str, config: RetentionConfig = NO_AGE, now: datetime = T0) -> int:
    async def main() -> int:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            return await Retention(config).run_once(conn, now)

    return asyncio.run(main())


# --- the rule --------------------------------------------------------------------------------


def test_each_schedule_keeps_its_newest_succeeded_and_failed_jobs(
    app: tickwork.App, conn: psycopg.Connection[Any], database_url: str
) -> None:
    app.sync_schedules("ns", [schedule("a", succeeded=2, failed=1), schedule("b", 1, 2)])
    app.sync_schedules("other", [schedule("a", succeeded=0, failed=0)])
    a, b, other = ("ns", "a"), ("ns", "b"), ("other", "a")
    plan = [
        Ended(a, SUCCEEDED, 1),
        Ended(a, DEAD, 2),
        Ended(a, SUCCEEDED, 3),
        Ended(a, CANCELLED, 4),  # cancelled counts as failed: it pushes out the dead job
        Ended(a, SUCCEEDED, 5),
        Ended(b, SUCCEEDED, 1),
        Ended(b, SUCCEEDED, 2),
        Ended(b, DEAD, 3),
        Ended(b, CANCELLED, 4),
        Ended(b, DEAD, 5),
        Ended(other, SUCCEEDED, 6),
        Ended(other, DEAD, 7),
        Ended(None, SUCCEEDED, 0),
        Ended(None, DEAD, 0),
        Ended(None, CANCELLED, 0),
    ]
    ids = end_jobs(conn, plan)
    assert queued(conn) >= {a, b, other}
    deleted = retain(database_url)
    kept = job_ids(conn)
    by_index = dict(enumerate(ids))
    assert kept == {by_index[i] for i in (2, 3, 4, 6, 8, 9, 12, 13, 14)}
    assert deleted == len(ids) - len(kept) == 6
    assert queued(conn) == set()
    # A second pass has nothing queued, reads no history and deletes nothing.
    assert retain(database_url) == 0


def test_limits_of_zero_keep_no_history_and_the_operator_still_knows_the_last_job(
    app: tickwork.App, conn: psycopg.Connection[Any], database_url: str
) -> None:
    app.sync_schedules("ns", [schedule("zero", succeeded=0, failed=0)])
    first = app.trigger("ns", "zero", actor="test")
    last = app.trigger("ns", "zero", actor="test")  # the schedule's last job
    jobs = {job.id: job for job in claim(conn, kinds=[KIND])}
    assert store.run(conn, jobs_db.mark_job_dead(jobs[first], "boom", T0))
    assert store.run(conn, jobs_db.complete_jobs([jobs[last]], T0 + timedelta(seconds=1)))
    conn.commit()
    assert retain(database_url) == 2
    assert job_ids(conn) == set()
    # What the operator's status reads: the id and outcome stay, the job's times are gone.
    [row] = store.run(conn, jobs_db.last_job_list(["ns"]))
    assert (row.id, row.status, row.finished_at) == (last, SUCCEEDED, None)


def test_the_age_rule_still_applies_to_every_job(
    app: tickwork.App, conn: psycopg.Connection[Any], database_url: str
) -> None:
    app.sync_schedules("ns", [schedule("big", succeeded=1000, failed=1000)])
    ids = end_jobs(conn, [Ended(("ns", "big"), SUCCEEDED, s) for s in (0, 100, 200)])
    config = RetentionConfig(age_seconds=150)
    assert retain(database_url, config, now=T0 + timedelta(seconds=300)) == 2
    assert job_ids(conn) == {ids[2]}


def test_a_sync_that_lowers_a_limit_trims_without_a_new_job(
    app: tickwork.App, conn: psycopg.Connection[Any], database_url: str
) -> None:
    app.sync_schedules("ns", [schedule("s", succeeded=5)])
    ids = end_jobs(conn, [Ended(("ns", "s"), SUCCEEDED, s) for s in range(5)])
    assert retain(database_url) == 0
    assert queued(conn) == set()
    app.sync_schedules("ns", [schedule("s", succeeded=2)])
    assert queued(conn) == {("ns", "s")}
    assert retain(database_url) == 3
    assert job_ids(conn) == set(ids[3:])
    # A sync that changes something else queues nothing.
    app.sync_schedules("ns", [dataclasses.replace(schedule("s", succeeded=2), suspend=True)])
    assert queued(conn) == set()


def test_a_stored_spec_without_limits_gets_cronjobs_defaults(
    app: tickwork.App, conn: psycopg.Connection[Any], database_url: str
) -> None:
    """A schedule synced before the fields existed (its stored spec lacks them) keeps 3
    succeeded and 1 failed job, as a CronJob without them does."""
    app.sync_schedules("ns", [schedule("old", succeeded=50, failed=50)])
    conn.execute(
        "UPDATE tickwork.schedules SET spec = spec - 'successfulJobsHistoryLimit'"
        " - 'failedJobsHistoryLimit'"
    )
    conn.commit()
    plan = [Ended(("ns", "old"), SUCCEEDED if s % 2 else DEAD, s) for s in range(10)]
    ids = end_jobs(conn, plan)
    retain(database_url)
    assert job_ids(conn) == {ids[5], ids[7], ids[9], ids[8]}


def test_a_damaged_stored_limit_keeps_the_most_and_stops_nothing(
    app: tickwork.App, conn: psycopg.Connection[Any], database_url: str
) -> None:
    """Stored specs edited by hand (a string, a negative number, a huge one, null): the pass
    goes on, those schedules keep up to 1000 jobs (a null: the default), the others are
    trimmed as usual."""
    names = ["text", "negative", "huge", "null", "fine"]
    app.sync_schedules("ns", [schedule(name, succeeded=1, failed=1) for name in names])
    for name, value in [("text", '"abc"'), ("negative", "-5"), ("huge", "1e400"), ("null", "null")]:
        conn.execute(
            "UPDATE tickwork.schedules SET spec = jsonb_set(spec,"
            " '{successfulJobsHistoryLimit}', %s::jsonb) WHERE name = %s",
            (value, name),
        )
    conn.commit()
    plan = [Ended(("ns", name), SUCCEEDED, s) for name in names for s in range(5)]
    ids = end_jobs(conn, plan)
    retain(database_url)
    kept = job_ids(conn)
    by_name = {name: ids[i * 5 : i * 5 + 5] for i, name in enumerate(names)}
    for name in ("text", "negative", "huge"):
        assert set(by_name[name]) <= kept, name
    assert kept & set(by_name["null"]) == set(by_name["null"][2:])  # the default: 3
    assert kept & set(by_name["fine"]) == {by_name["fine"][-1]}
    assert queued(conn) == set()


def test_a_long_history_is_trimmed_in_capped_statements_within_one_pass(
    app: tickwork.App, conn: psycopg.Connection[Any], database_url: str
) -> None:
    """At most ``batch`` jobs per schedule and outcome per statement; the schedule stays
    queued until its history is within its limits, all in the same pass."""
    app.sync_schedules("ns", [schedule(f"s{i}", succeeded=1, failed=0) for i in range(3)])
    plan = [Ended(("ns", f"s{i}"), SUCCEEDED, s) for i in range(3) for s in range(8)]
    ids = end_jobs(conn, plan)
    config = RetentionConfig(age_seconds=NO_AGE.age_seconds, batch=2, history_batch=2)
    assert retain(database_url, config) == 21
    assert job_ids(conn) == {ids[7], ids[15], ids[23]}
    assert queued(conn) == set()


def test_a_queued_schedule_that_no_longer_exists_is_dequeued(
    conn: psycopg.Connection[Any], database_url: str
) -> None:
    conn.execute("INSERT INTO tickwork.schedule_history_pending VALUES ('gone', 'x', 0)")
    conn.commit()
    assert retain(database_url) == 0
    assert queued(conn) == set()


def test_the_upgrade_trims_every_existing_history_to_the_defaults(
    empty_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database of the version before (migration 0010) with schedules and their finished
    jobs: migration 0011 queues every schedule, and the first pass keeps 3 + 1 of each."""
    shipped = migrate.available()
    before = [m for m in shipped if m.version < 11]
    with monkeypatch.context() as older:
        older.setattr(migrate, "available", lambda: before)
        migrate.apply(empty_database_url)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        tickwork.App(empty_database_url).sync_schedules("ns", [schedule("old"), schedule("new")])
        # The specs as that version stored them: no limits.
        conn.execute(
            "UPDATE tickwork.schedules SET spec = spec - 'successfulJobsHistoryLimit'"
            " - 'failedJobsHistoryLimit'"
        )
        conn.execute(
            """
            INSERT INTO tickwork.jobs (kind, status, schedule_namespace, schedule_name,
                                       finished_at)
            SELECT 'k',
                   (CASE WHEN i %% 4 = 0 THEN 'dead' ELSE 'succeeded' END)::tickwork.job_status,
                   'ns', CASE WHEN i %% 2 = 0 THEN 'old' ELSE 'new' END,
                   %s + make_interval(secs => i)
            FROM generate_series(1, 40) AS i
            """,
            (T0,),
        )
    assert [m.version for m in migrate.apply(empty_database_url)] == [
        m.version for m in shipped if m.version >= 11
    ]
    with psycopg.connect(empty_database_url) as conn:
        assert queued(conn) == {("ns", "old"), ("ns", "new")}
        retain(empty_database_url)
        kept = conn.execute(
            "SELECT schedule_name, status::text, count(*) FROM tickwork.jobs"
            " GROUP BY 1, 2 ORDER BY 1, 2"
        ).fetchall()
    assert kept == [("new", "succeeded", 3), ("old", "dead", 1), ("old", "succeeded", 3)]


# --- any sequence of outcomes -------------------------------------------------------------

SCHEDULES = [("ns", "a"), ("ns", "b"), ("ns2", "a")]
"""The same name in two namespaces: a join on the name alone would mix their histories."""


@st.composite
def histories(draw: st.DrawFn) -> tuple[dict[Any, tuple[int, int]], list[Ended]]:
    limits = {key: (draw(st.integers(0, 4)), draw(st.integers(0, 3))) for key in SCHEDULES}
    plan = draw(
        st.lists(
            st.builds(
                Ended,
                st.sampled_from([*SCHEDULES, None]),
                st.sampled_from([SUCCEEDED, DEAD, CANCELLED]),
                st.integers(0, 6),  # few instants: ties are ranked by id
            ),
            max_size=24,
        )
    )
    return limits, plan


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(history=histories())
def test_any_sequence_of_outcomes_keeps_exactly_the_newest_of_each(
    app: tickwork.App,
    conn: psycopg.Connection[Any],
    database_url: str,
    history: tuple[dict[Any, tuple[int, int]], list[Ended]],
) -> None:
    limits, plan = history
    conn.execute("DELETE FROM tickwork.jobs")
    conn.commit()
    for namespace in ("ns", "ns2"):
        definitions = [
            schedule(name, *limits[(ns, name)]) for ns, name in SCHEDULES if ns == namespace
        ]
        app.sync_schedules(namespace, definitions)
    retain(database_url)  # the limits' changes trimmed nothing: no jobs yet
    ids = end_jobs(conn, plan)
    retain(database_url)
    assert job_ids(conn) == expected_kept(ids, plan, limits)
    assert queued(conn) == set()


# --- two retention processes racing while jobs keep ending ------------------------------


def retention_process(database_url: str, start: Any, rounds: int) -> None:
    async def main() -> None:
        config = RetentionConfig(age_seconds=NO_AGE.age_seconds, batch=3, history_batch=4)
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            start.wait()
            for _ in range(rounds):
                await Retention(config).run_once(conn, T0)

    asyncio.run(main())


def test_two_retention_processes_racing_never_delete_within_the_limits(
    app: tickwork.App, conn: psycopg.Connection[Any], database_url: str
) -> None:
    """Two processes run retention passes over and over while this one keeps ending jobs of
    the same schedules. Whatever interleaving happened, every job among the newest N of its
    schedule and outcome is still there at the end (after a last pass: exactly those)."""
    limits = {("ns", f"s{i}"): (i % 4, (i + 1) % 3) for i in range(12)}
    app.sync_schedules("ns", [schedule(name, *limits[(ns, name)]) for ns, name in limits])
    keys = sorted(limits)
    plan = [
        Ended(keys[(i * 7) % len(keys)], (SUCCEEDED, DEAD, CANCELLED)[i % 5 % 3], i)
        for i in range(240)
    ]
    first, rest = plan[:120], plan[120:]
    ids = end_jobs(conn, first)
    spawn = process_context()
    start = spawn.Event()
    racers = [
        spawn.Process(target=retention_process, args=(database_url, start, 40)) for _ in range(2)
    ]
    for racer in racers:
        racer.start()
    start.set()
    for index in range(0, len(rest), 6):  # jobs keep ending during the race
        ids += end_jobs(conn, rest[index : index + 6])
    for racer in racers:
        racer.join(timeout=120)
        assert racer.exitcode == 0
    expected = expected_kept(ids, plan, limits)
    assert len(job_ids(conn)) < len(ids), "the racers trimmed"
    assert expected <= job_ids(conn), "a job within its schedule's limits was deleted"
    retain(database_url)
    assert job_ids(conn) == expected
    assert queued(conn) == set()


# --- the plans -------------------------------------------------------------------------------


def scans_of_jobs(conn: psycopg.Connection[Any], query: str, params: dict[str, Any]) -> set[str]:
    """How the plan of a named query reads ``tickwork.jobs``: each node's type and index."""
    [(plan,)] = conn.execute(f"EXPLAIN (FORMAT JSON) {QUERIES[query]}", params).fetchall()
    found: set[str] = set()
    todo = [plan[0]["Plan"]]
    while todo:
        node = todo.pop()
        todo.extend(node.get("Plans", []))
        if node.get("Relation Name") == "jobs":
            found.add(f"{node['Node Type']} {node.get('Index Name', '')}".strip())
    return found


def test_the_console_and_retention_read_the_history_index(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    """jobs_schedule_dead_idx gave way to jobs_schedule_history_idx: the console's last
    failure of each schedule (admin_schedules) and the history trim read it, never the whole
    jobs table, at 200 schedules with 100 finished jobs each beside 20,000 one-off jobs."""
    app.sync_schedules("ns", [schedule(f"s{i:03}") for i in range(200)])
    conn.execute(
        """
        INSERT INTO tickwork.jobs (kind, status, schedule_namespace, schedule_name,
                                   started_at, finished_at)
        SELECT 'k', (ARRAY['succeeded', 'dead', 'cancelled'])[1 + i % 3]::tickwork.job_status,
               CASE WHEN i % 2 = 0 THEN 'ns' END,
               CASE WHEN i % 2 = 0 THEN format('s%s', lpad((i % 200)::text, 3, '0')) END,
               now(), now() - make_interval(secs => i)
        FROM generate_series(1, 40000) AS i
        """
    )
    conn.execute("ANALYZE tickwork.jobs")
    conn.commit()
    page = {"namespace": None, "scope": None, "name": None}
    page |= {"after_namespace": None, "after_name": None, "limit": 50}
    console = scans_of_jobs(conn, "admin_schedules", page)
    assert any(scan.endswith("Scan jobs_schedule_history_idx") for scan in console), console
    assert not any(scan.startswith("Seq Scan") for scan in console), console
    trim = {"schedules": 100, "limit": 1000, "succeeded": 3, "failed": 1, "max": 1000}
    trimming = scans_of_jobs(conn, "job_trim_histories", trim)
    assert any(scan.endswith("Scan jobs_schedule_history_idx") for scan in trimming), trimming
    assert not any(scan.startswith("Seq Scan") for scan in trimming), trimming
