"""The claim under flow rules, statement by statement on one database (the fleet tests, with
worker processes, are test_limit_fleet.py): concurrency limits of a queue, a kind, a namespace
and a concurrency key; rate limits, keyed by a payload field; fair shares between tenants;
and what a claim does with a rule it does not hold."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import psycopg
import pytest

import tickwork
from tests.support.helpers import T0, claim, scalar
from tickwork.clock import SettableClock
from tickwork.db import jobs as jobs_db
from tickwork.db import store
from tickwork.errors import InvalidInput
from tickwork.model import Job

KIND = "flow.job"
OTHER = "flow.other"


def claim_ruled(
    conn: psycopg.Connection[Any],
    *,
    kinds: Sequence[str] = (KIND, OTHER),
    queues: Sequence[str] = ("default", "q"),
    limit: int = 100,
    now: Any = T0,
) -> list[Job]:
    """A worker's claim: the rules locked, then the claim, in one transaction."""
    with conn.transaction():
        store.run(conn, jobs_db.lock_claim_rules(queues, kinds, now))
        return claim(conn, kinds=kinds, queues=queues, limit=limit, now=now)


def finish(conn: psycopg.Connection[Any], jobs: Sequence[Job]) -> None:
    store.run(conn, jobs_db.complete_jobs(list(jobs), T0))


def tenant(job: Job) -> str:
    return job.schedule.namespace if job.schedule else ""


def insert_tenant_jobs(
    conn: psycopg.Connection[Any], namespace: str, count: int, run_at_offset: float = 0
) -> None:
    """Jobs of a schedule namespace's schedule (the tenant), due at T0 + offset."""
    conn.execute(
        "INSERT INTO tickwork.jobs (kind, schedule_namespace, schedule_name, run_at) "
        "SELECT %s, %s, 'every', %s + make_interval(secs => %s + n * 0.001) "
        "FROM generate_series(1, %s) AS n",
        (KIND, namespace, T0 - timedelta(hours=1), run_at_offset, count),
    )


def test_a_queue_limit_caps_its_running_jobs_and_frees_room_as_they_end(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    app.set_limit("queue", "q", max_running=2, actor="test")
    app.enqueue_many(KIND, [{}] * 5, queue="q")
    first = claim_ruled(conn)
    assert len(first) == 2
    assert claim_ruled(conn) == []
    finish(conn, first[:1])
    assert len(claim_ruled(conn)) == 1


def test_a_claim_without_the_rules_leaves_a_limited_group_alone_but_not_the_others(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    """A worker that has not looked at the rules yet never exceeds one, and a limited queue's
    jobs ahead in claim order hold back no other queue's."""
    app.set_limit("queue", "q", max_running=2, actor="test")
    limited = app.enqueue_many(KIND, [{}] * 5, queue="q", run_at=T0 - timedelta(hours=1))
    free = app.enqueue_many(KIND, [{}] * 3)
    taken = claim(conn, kinds=[KIND], queues=["default", "q"], limit=3)
    assert {j.id for j in taken} == set(free)
    assert {j.id for j in claim_ruled(conn, limit=3)} <= set(limited)


def test_a_rule_held_by_another_claim_gives_none_until_it_commits_then_counts_its_jobs(
    app: tickwork.App, database_url: str, conn: psycopg.Connection[Any]
) -> None:
    """The race the rule locks settle: claimer A holds the queue's rule with 2 of its 3 taken,
    uncommitted; B takes none of the queue then (its try-lock fails) but the other queue's
    job; after A's commit B sees A's 2 and takes 1."""
    app.set_limit("queue", "q", max_running=3, actor="test")
    app.enqueue_many(KIND, [{}] * 6, queue="q")
    other = app.enqueue(KIND)
    with psycopg.connect(database_url, autocommit=True) as a:
        with a.transaction():
            store.run(a, jobs_db.lock_claim_rules(["q"], [KIND], T0))
            assert len(claim(a, kinds=[KIND], queues=["q"], limit=2)) == 2
            during = claim_ruled(conn)
            assert [j.id for j in during] == [other]
        after = claim_ruled(conn)
    assert len(after) == 1
    assert scalar(conn, "SELECT count(*) FROM tickwork.jobs WHERE status = 'running'") == 4


def test_the_most_restrictive_rule_applies(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    app.set_limit("queue", "q", max_running=5, actor="test")
    app.set_limit("kind", KIND, max_running=2, actor="test")
    app.enqueue_many(KIND, [{}] * 6, queue="q")
    app.enqueue_many(OTHER, [{}] * 4, queue="q")
    first = Counter(j.kind for j in claim_ruled(conn))
    assert first[KIND] == 2
    assert first[KIND] + first[OTHER] <= 5, "never over"
    # Within one claim a rule's room may go to jobs another rule then refuses: the next claim
    # takes the rest (the full kind is left out of its scan).
    taken = first + Counter(j.kind for j in claim_ruled(conn))
    assert taken == {KIND: 2, OTHER: 3}


def test_a_namespace_limit_caps_its_schedules_jobs_only(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    app.set_limit("namespace", "team-a", max_running=3, actor="test")
    insert_tenant_jobs(conn, "team-a", 10)
    insert_tenant_jobs(conn, "team-b", 10)
    taken = Counter(tenant(j) for j in claim_ruled(conn))
    assert taken == {"team-a": 3, "team-b": 10}


def test_a_rate_allows_so_many_starts_per_window_on_the_database_clock(
    app: tickwork.App, clock: SettableClock, conn: psycopg.Connection[Any]
) -> None:
    app.set_limit("queue", "q", rate="3/min", actor="test")
    app.enqueue_many(KIND, [{}] * 10, queue="q")
    first = claim_ruled(conn)
    assert len(first) == 3
    finish(conn, first)  # ended jobs still count: a rate counts starts
    assert claim_ruled(conn, now=T0 + timedelta(seconds=59)) == []
    assert len(claim_ruled(conn, now=T0 + timedelta(seconds=60.001))) == 3
    assert scalar(conn, "SELECT sum(starts) FROM tickwork.flow_starts") == 3, "pruned"


def test_a_keyed_rate_counts_each_payload_value_apart_and_a_missing_field_as_empty(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    app.set_limit("kind", KIND, rate="2/min", rate_key="customer", actor="test")
    payloads = [{"customer": c} for c in "aaabbb"] + [{}, {}, {"customer": None}, [1]]
    app.enqueue_many(KIND, payloads)
    taken = Counter(
        str(j.payload.get("customer")) if isinstance(j.payload, dict) else "list"
        for j in claim_ruled(conn)
    )
    assert taken["a"] == 2 and taken["b"] == 2
    assert taken["None"] + taken["list"] == 2, "no field, null or no object: the empty key"
    assert claim_ruled(conn) == []


def test_a_concurrency_key_runs_its_limit_at_once_each_in_its_own_slot(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    app.enqueue_many(KIND, [{}] * 5, concurrency_key="k", concurrency_limit=3)
    first = claim_ruled(conn)
    assert len(first) == 3
    slots = "SELECT array_agg(concurrency_slot ORDER BY concurrency_slot) FROM tickwork.jobs "
    assert scalar(conn, slots + "WHERE status = 'running'") == [0, 1, 2]
    assert claim_ruled(conn) == []
    finish(conn, first[1:2])
    assert len(claim_ruled(conn)) == 1
    assert scalar(conn, slots + "WHERE status = 'running'") == [0, 1, 2]


def test_a_concurrency_limit_without_a_key_or_out_of_range_is_refused(
    app: tickwork.App,
) -> None:
    with pytest.raises(InvalidInput, match="needs a concurrency_key") as caught:
        app.enqueue(KIND, concurrency_limit=2)
    assert caught.value.field == "concurrency_limit"
    for bad in (0, -1, 10**12):
        with pytest.raises(InvalidInput) as caught:
            app.enqueue(KIND, concurrency_key="k", concurrency_limit=bad)
        assert caught.value.field == "concurrency_limit"


def test_tenants_share_a_claim_a_backlog_does_not_hold_back_a_newer_tenant(
    conn: psycopg.Connection[Any],
) -> None:
    insert_tenant_jobs(conn, "loud", 1000)
    insert_tenant_jobs(conn, "quiet", 3, run_at_offset=3000)  # due, but last in run_at order
    app_jobs = 2
    conn.execute(
        "INSERT INTO tickwork.jobs (kind, run_at) SELECT %s, %s FROM generate_series(1, %s)",
        (KIND, T0, app_jobs),
    )
    taken = Counter(tenant(j) for j in claim_ruled(conn, limit=10))
    assert taken == {"quiet": 3, "": 2, "loud": 5}, "each its share, the rest filled by age"


def test_weights_split_a_claim_between_backlogged_tenants(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    app.set_limit("namespace", "heavy", weight=3, actor="test")
    insert_tenant_jobs(conn, "heavy", 500, run_at_offset=100)
    insert_tenant_jobs(conn, "light", 500)
    taken = Counter(tenant(j) for j in claim_ruled(conn, limit=40))
    assert taken == {"heavy": 30, "light": 10}


def test_higher_priority_goes_first_whatever_the_tenant(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    insert_tenant_jobs(conn, "loud", 100)
    urgent = app.enqueue_many(KIND, [{}] * 3, priority=5)
    taken = claim_ruled(conn, limit=3)
    assert [j.id for j in taken] == urgent


def test_a_spent_keys_backlog_holds_back_no_other_key(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    """Customer a's 300 jobs ahead in claim order, its rate spent: b's job behind them is
    claimed in the same claim as a's allowance, and alone in the next."""
    app.set_limit("kind", KIND, rate="2/min", rate_key="customer", actor="test")
    app.enqueue_many(KIND, [{"customer": "a"}] * 300, run_at=T0 - timedelta(minutes=5))
    late = app.enqueue(KIND, {"customer": "b"})
    first = claim_ruled(conn, limit=10)
    assert [j.payload["customer"] for j in first].count("a") == 2
    app.enqueue(KIND, {"customer": "c"})
    second = claim_ruled(conn, limit=10)
    assert {j.payload["customer"] for j in second} <= {"b", "c"}
    assert late in {j.id for j in first + second}
    assert [j.payload["customer"] for j in second].count("c") == 1
