"""The counts of how jobs ended (``tickwork.job_counts``, migration 0017) on a real PostgreSQL:
every statement that ends a job counts it once, under the minute it ended, its schedule,
queue, kind and outcome, with its run time and start lag, and nothing else counts (a claim, a
heartbeat, a stop request, a hand-back, an operator's retry, an on_dead hook); the counts
outlive the history limits and the age rule, and go after the stats retention; and two
connections ending jobs of one group in one minute never wait for each other (no hot row).

Jobs end through the real outcome statements at pinned instants, as the worker, lease
recovery and the operators' actions run them."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest

import tickwork
from tests.maintenance.test_history_limits import (
    DEAD,
    SUCCEEDED,
    Ended,
    end_jobs,
    job_ids,
    retain,
    schedule,
)
from tests.support.helpers import T0, claim, scalar
from tickwork.db import job_counts as job_counts_db
from tickwork.db import jobs as jobs_db
from tickwork.db import store
from tickwork.errors import ConfigurationError
from tickwork.maintenance.retention import RetentionConfig
from tickwork.model import Job

NS, NAME = "billing", "tick"
LAGS = {"ok": 10, "dies": 11, "retried": 12, "handed": 13, "stopped": 14, "waiting": 15}
LAGS.update({"lost": 16, "lost-last": 17})
"""Seconds from each scheduled job's occurrence to T0, when it is first claimed."""


def add_job(conn: psycopg.Connection[Any], kind: str, *, scheduled: bool = True) -> int:
    namespace, name = (NS, NAME) if scheduled else (None, None)
    occurrence = T0 - timedelta(seconds=LAGS[kind]) if scheduled else None
    return int(
        scalar(
            conn,
            "INSERT INTO tickwork.jobs (kind, schedule_namespace, schedule_name, occurrence_at,"
            " run_at) VALUES (%s, %s, %s, %s, %s) RETURNING id",
            (kind, namespace, name, occurrence, T0 - timedelta(hours=1)),
        )
    )


def claimed(
    conn: psycopg.Connection[Any], kind: str, *, max_attempts: int = 3, now: datetime = T0
) -> Job:
    (job,) = claim(conn, kinds=[kind], max_attempts=max_attempts, now=now)
    return job


def counts(conn: psycopg.Connection[Any]) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    """(minute offset from T0 in minutes, namespace, name, kind, outcome) -> (jobs, timed,
    run seconds, lagged, lag seconds, worst lag), the shards summed. A failed attempt has no
    end time of its own: it is counted at the database's time, so its minute and run time are
    None here (the database's time is not the tests' pinned one)."""
    rows = conn.execute(
        "SELECT CASE WHEN outcome <> 'failed' THEN extract(epoch FROM minute - %s)::int / 60 END,"
        "       schedule_namespace, schedule_name, kind, outcome, sum(jobs)::int, sum(timed)::int,"
        "       CASE WHEN outcome <> 'failed' THEN sum(run_seconds) END,"
        "       sum(lagged)::int, sum(lag_seconds), max(max_lag_seconds)"
        " FROM tickwork.job_counts GROUP BY 1, 2, 3, 4, 5",
        (T0,),
    )
    return {tuple(row[:5]): tuple(row[5:]) for row in rows}


def test_every_way_a_job_ends_counts_it_once_and_nothing_else_counts(
    conn: psycopg.Connection[Any],
) -> None:
    ids = {kind: add_job(conn, kind) for kind in ("ok", "dies", "retried", "handed", "stopped")}
    ids["waiting"] = add_job(conn, "waiting")
    ids["lost"] = add_job(conn, "lost")
    ids["lost-last"] = add_job(conn, "lost-last")
    ids["one-off"] = add_job(conn, "one-off", scheduled=False)
    at = {seconds: T0 + timedelta(seconds=seconds) for seconds in (30, 90, 200, 400)}

    ok, dies, retried = claimed(conn, "ok"), claimed(conn, "dies"), claimed(conn, "retried")
    # claims, heartbeats and a stop request change no outcome
    assert store.run(conn, jobs_db.extend_leases([ok, dies], 30.0, at[30]))
    assert store.run(conn, jobs_db.complete_jobs([ok], at[90])) == {ok.id}  # minute 1
    assert store.run(conn, jobs_db.mark_job_dead(dies, "boom", at[30]))  # minute 0
    assert store.run(conn, jobs_db.retry_job_later(retried, 0.0, "flaky", at[30]))
    again = claimed(conn, "retried", now=at[30])
    assert store.run(conn, jobs_db.complete_jobs([again], at[90])) == {again.id}
    handed = claimed(conn, "handed")
    assert store.run(conn, jobs_db.hand_back_jobs([handed], at[30])) == {handed.id}
    stopped = claimed(conn, "stopped")
    assert store.run(conn, jobs_db.cancel_job(stopped.id, at[30]))  # a request: still running
    assert store.run(conn, jobs_db.record_cancelled(stopped, at[200]))  # minute 3
    assert store.run(conn, jobs_db.cancel_job(ids["waiting"], at[200]))  # never ran
    claimed(conn, "lost")
    claimed(conn, "lost-last", max_attempts=1)
    recovered = store.run(conn, jobs_db.recover_expired_leases(10, at[400]))
    assert {r.status.value for r in recovered} == {"available", "dead"}  # minute 6 for dead
    # an operator's retry of a dead job and the on_dead hook are no outcome either
    assert store.run(conn, jobs_db.retry_dead_job(dies.id, at[400]))
    (pending,) = store.run(conn, jobs_db.lock_dead_hooks_pending(["lost-last"], 10))
    assert store.run(conn, jobs_db.dead_hook_ran(pending, None))
    one_off = claimed(conn, "one-off")
    assert store.run(conn, jobs_db.complete_jobs([one_off], at[30])) == {one_off.id}

    assert counts(conn) == {
        (1, NS, NAME, "ok", "succeeded"): (1, 1, 90.0, 1, 10.0, 10.0),
        (0, NS, NAME, "dies", "dead"): (1, 1, 30.0, 1, 11.0, 11.0),
        (None, NS, NAME, "retried", "failed"): (1, 1, None, 1, 12.0, 12.0),
        # its second attempt started at T0 + 30 s
        (1, NS, NAME, "retried", "succeeded"): (1, 1, 60.0, 1, 42.0, 42.0),
        (3, NS, NAME, "stopped", "cancelled"): (1, 1, 200.0, 1, 14.0, 14.0),
        (3, NS, NAME, "waiting", "cancelled"): (1, 0, 0.0, 0, 0.0, None),
        (None, NS, NAME, "lost", "failed"): (1, 1, None, 1, 16.0, 16.0),
        (6, NS, NAME, "lost-last", "dead"): (1, 1, 400.0, 1, 17.0, 17.0),
        (0, "", "", "one-off", "succeeded"): (1, 1, 30.0, 0, 0.0, None),
    }
    runs = store.run(conn, job_counts_db.of_schedules([(NS, NAME), ("other", "none")]))
    assert replace(runs[NS, NAME], since=None) == job_counts_db.RunCounts(
        succeeded=2, dead=2, cancelled=2, failed_attempts=2, run_seconds=780.0, timed=5, since=None
    )
    first = scalar(conn, "SELECT min(minute) FROM tickwork.job_counts WHERE schedule_name <> ''")
    assert runs[NS, NAME].since == first
    assert runs[NS, NAME].success_rate == pytest.approx(2 / 6)
    assert runs["other", "none"] == job_counts_db.NONE


def test_counts_outlive_history_limits_and_age_are_merged_and_go_after_the_stats_retention(
    app: tickwork.App, conn: psycopg.Connection[Any], database_url: str
) -> None:
    app.sync_schedules(NS, [schedule(NAME, succeeded=3, failed=1)])
    key = (NS, NAME)
    plan = [Ended(key, SUCCEEDED, 60 * i) for i in range(10)] + [Ended(key, DEAD, 5)] * 4
    end_jobs(conn, plan)

    def runs() -> tuple[int, int]:
        found = store.run(conn, job_counts_db.of_schedules([key]))[key]
        return found.succeeded, found.dead

    retain(database_url)  # the history limits: 3 succeeded and 1 dead kept
    assert len(job_ids(conn)) == 4
    assert runs() == (10, 4)
    day = 86400.0
    config = RetentionConfig(age_seconds=day, stats_age_seconds=30 * day)
    retain(database_url, config, now=T0 + timedelta(days=2))  # the age rule: every job
    assert job_ids(conn) == set()
    assert runs() == (10, 4)
    # Merged per hour after 6 hours, per day after 7 days: one row per outcome left.
    retain(database_url, config, now=T0 + timedelta(days=29))
    assert runs() == (10, 4)
    rows = conn.execute("SELECT minute, shard FROM tickwork.job_counts").fetchall()
    assert rows == [(T0, 0), (T0, 0)]
    # The stats retention deletes what is older than it.
    retain(database_url, config, now=T0 + timedelta(days=31))
    assert runs() == (0, 0)
    assert scalar(conn, "SELECT count(*) FROM tickwork.job_counts") == 0


def test_a_stats_retention_that_is_not_positive_is_refused_naming_it() -> None:
    with pytest.raises(ConfigurationError, match=r"^stats_age_seconds: must be positive"):
        RetentionConfig(stats_age_seconds=0)


def test_two_connections_ending_jobs_of_one_group_in_one_minute_never_wait_for_each_other(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    """Each connection adds to its own rows (shard: its backend's pid): a completion holding
    its transaction open does not block another connection's completion of the same minute,
    queue and kind. With one row per group, the second would wait for the first's commit."""
    for _ in range(2):
        add_job(conn, "same", scheduled=False)
    first, second = claim(conn, kinds=["same"], now=T0)
    with (
        psycopg.connect(database_url) as a,
        psycopg.connect(database_url) as b,
    ):
        a.execute("SET lock_timeout = '2s'")
        b.execute("SET lock_timeout = '2s'")
        assert store.run(a, jobs_db.complete_jobs([first], T0)) == {first.id}  # a stays open
        assert store.run(b, jobs_db.complete_jobs([second], T0)) == {second.id}  # no wait
        b.commit()
        a.commit()
    shards = conn.execute(
        "SELECT shard, jobs FROM tickwork.job_counts WHERE kind = 'same'"
    ).fetchall()
    assert len(shards) == 2 and sum(jobs for _, jobs in shards) == 2


def test_the_counts_of_old_minutes_are_deleted_oldest_first_in_batches(
    conn: psycopg.Connection[Any],
) -> None:
    for kind in ("a", "b", "c"):
        job = store.run(conn, jobs_db.complete_jobs([claimed_new(conn, kind)], T0))
        assert job
    deleted = store.run(conn, job_counts_db.delete_old(60.0, 2, T0 + timedelta(minutes=5)))
    assert deleted == 2
    assert scalar(conn, "SELECT count(*) FROM tickwork.job_counts") == 1


def claimed_new(conn: psycopg.Connection[Any], kind: str) -> Job:
    add_job(conn, kind, scheduled=False)
    return claimed(conn, kind)


def test_old_counts_are_merged_per_hour_then_per_day_keeping_every_sum(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    """Counts written by two connections (shards) over minutes of three hours are merged in
    batches smaller than an hour's rows into one row per hour, then per day, under shard 0;
    the sums and the worst lag stay; the counts younger than the age are left alone."""
    minutes = (1, 2, 61, 62, 500)
    with (
        psycopg.connect(database_url, autocommit=True) as a,
        psycopg.connect(database_url, autocommit=True) as b,
    ):
        for minute in minutes:
            ended = T0 + timedelta(minutes=minute)
            started = ended - timedelta(seconds=30)
            for writer, lag in ((a, 5), (b, minute)):
                conn.execute(
                    "INSERT INTO tickwork.jobs (kind, schedule_namespace, schedule_name,"
                    " occurrence_at, run_at) VALUES ('merged', %s, %s, %s, %s)",
                    (NS, NAME, started - timedelta(seconds=lag), T0 - timedelta(hours=1)),
                )
                (job,) = claim(writer, kinds=["merged"], now=started)
                assert store.run(writer, jobs_db.complete_jobs([job], ended))

    def table() -> list[tuple[Any, ...]]:
        return sorted(
            conn.execute(
                "SELECT extract(epoch FROM minute - %s)::int / 60, shard = 0, jobs, timed,"
                " run_seconds, lagged, lag_seconds, max_lag_seconds FROM tickwork.job_counts",
                (T0,),
            ).fetchall()
        )

    assert len(table()) == 10 and not any(row[1] for row in table())  # a row per connection

    def compact(unit: str, now: datetime) -> int:
        moved, total = 1, 0
        while moved:
            moved = store.run(conn, job_counts_db.compact(unit, 3600.0, 3, now))
            total += moved
        return total

    assert compact("hour", T0 + timedelta(minutes=130)) == 8  # minute 500 is younger
    assert table() == [
        (0, True, 4, 4, 120.0, 4, 5 + 1 + 5 + 2.0, 5.0),
        (60, True, 4, 4, 120.0, 4, 5 + 61 + 5 + 62.0, 62.0),
        (500, False, 1, 1, 30.0, 1, 5.0, 5.0),
        (500, False, 1, 1, 30.0, 1, 500.0, 500.0),
    ]
    assert compact("day", T0 + timedelta(days=1)) == 3  # the day's own row stays
    assert table() == [(0, True, 10, 10, 300.0, 10, 651.0, 500.0)]
    assert compact("day", T0 + timedelta(days=1)) == 0
