"""Fair claiming by kind (migration 0029): a claim shares its batch between the tenants that
have waiting jobs of the kinds it serves, walking them per queue and kind, so the jobs of other
kinds are never read and a tenant whose waiting jobs are all of other kinds takes no share.
Statement by statement on one database, a hypothesis search against the rules, and claimers in
several processes racing over many namespaces."""

from __future__ import annotations

import multiprocessing
from collections import Counter
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import psycopg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.helpers import T0, claim
from tickwork.model import Job

KIND = "fair.job"
OTHER = "fair.other"
UNSERVED = "fair.unserved"


def tenant(job: Job) -> str:
    return job.schedule.namespace if job.schedule else ""


def insert_jobs(
    conn: psycopg.Connection[Any],
    namespace: str | None,
    count: int,
    *,
    kind: str = KIND,
    offset: float = 0,
    step: float = 0.001,
) -> None:
    """``count`` jobs of ``kind`` of the tenant ``namespace`` (None: enqueued from code), due
    at T0 - 1 h + offset, ``step`` seconds apart."""
    conn.execute(
        "INSERT INTO tickwork.jobs (kind, schedule_namespace, schedule_name, run_at) "
        "SELECT %(kind)s, %(ns)s, CASE WHEN %(ns)s::text IS NOT NULL THEN 'every' END,"
        " %(start)s + make_interval(secs => %(offset)s + n * %(step)s) "
        "FROM generate_series(1, %(count)s) AS n",
        {
            "kind": kind,
            "ns": namespace,
            "start": T0 - timedelta(hours=1),
            "offset": offset,
            "step": step,
            "count": count,
        },
    )


def test_a_tenant_whose_waiting_jobs_are_of_other_kinds_takes_no_share(
    conn: psycopg.Connection[Any],
) -> None:
    """The loud tenant's 2,000 jobs are of a kind this claimer does not serve, and the oldest:
    the batch is shared between the two tenants it can serve, not drawn with the loud one."""
    insert_jobs(conn, "loud", 2000, kind=UNSERVED)
    insert_jobs(conn, "team-a", 50, offset=100)
    insert_jobs(conn, "team-b", 50, offset=200)
    for _ in range(3):
        with conn.transaction(force_rollback=True):
            taken = Counter(tenant(j) for j in claim(conn, kinds=[KIND], limit=10))
        assert taken == {"team-a": 5, "team-b": 5}


def test_a_tenant_with_several_kinds_waiting_gives_its_oldest_first_across_them(
    conn: psycopg.Connection[Any],
) -> None:
    """Its jobs of two served kinds interleave in run_at order, a third kind not served among
    them: its share is its oldest jobs of the served kinds, whatever their kind."""
    insert_jobs(conn, "mixed", 20, kind=KIND, step=2)
    insert_jobs(conn, "mixed", 20, kind=OTHER, offset=1, step=2)
    insert_jobs(conn, "mixed", 20, kind=UNSERVED, offset=0.5, step=2)
    insert_jobs(conn, "single", 20, kind=OTHER, offset=3000)
    taken = claim(conn, kinds=[KIND, OTHER], limit=8)
    mine = [j for j in taken if tenant(j) == "mixed"]
    assert len(mine) == 4
    assert [j.kind for j in mine] == [KIND, OTHER, KIND, OTHER]
    assert [j.run_at for j in mine] == sorted(j.run_at for j in mine)
    assert Counter(tenant(j) for j in taken) == {"mixed": 4, "single": 4}


def test_what_a_tenant_of_several_kinds_locked_beyond_its_share_fills_the_batch(
    conn: psycopg.Connection[Any],
) -> None:
    """Shares of 5: the mixed tenant locks all its 3 + 3 jobs of two kinds (neither range gave
    all it was asked) and keeps its oldest 5; the short tenant has 1. What the shares left
    takes the mixed tenant's sixth job, already locked by this claim."""
    insert_jobs(conn, "mixed", 3, kind=KIND, step=2)
    insert_jobs(conn, "mixed", 3, kind=OTHER, offset=1, step=2)
    insert_jobs(conn, "short", 1, kind=KIND, offset=500)
    taken = claim(conn, kinds=[KIND, OTHER], limit=10)
    assert Counter(tenant(j) for j in taken) == {"mixed": 6, "short": 1}


def test_a_claim_of_kinds_nobody_enqueued_finds_nothing_beside_a_big_backlog(
    conn: psycopg.Connection[Any],
) -> None:
    insert_jobs(conn, "loud", 500, kind=UNSERVED)
    insert_jobs(conn, None, 500, kind=UNSERVED)
    assert claim(conn, kinds=[KIND, OTHER], limit=10) == []
    assert claim(conn, kinds=[UNSERVED], limit=10) != []


# --- the rules, searched ------------------------------------------------------------------

TENANTS = ["", "t1", "t2", "t3", "t4"]
KINDS = [KIND, OTHER, UNSERVED]

_group = st.tuples(
    st.sampled_from(TENANTS),
    st.sampled_from(KINDS),
    st.integers(min_value=1, max_value=12),  # jobs
    st.integers(min_value=-3000, max_value=600),  # first run_at, seconds from T0
    st.sampled_from([0.5, 7.0]),  # seconds apart
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    groups=st.lists(_group, min_size=1, max_size=8),
    served=st.lists(st.sampled_from(KINDS), min_size=1, max_size=3, unique=True),
    limit=st.integers(min_value=1, max_value=30),
)
def test_a_claim_takes_what_the_fair_rules_say(
    conn: psycopg.Connection[Any],
    groups: list[tuple[str, str, int, int, float]],
    served: list[str],
    limit: int,
) -> None:
    """Against an oracle of the rules (equal weights, priority 0): the claim takes
    min(limit, jobs it may take), only due jobs of the kinds served, each tenant its oldest ones
    first, and every tenant with jobs due at least its share of the batch (the batch divided
    between the tenants with waiting jobs of a kind served, due or not) or all it has."""
    conn.execute("DELETE FROM tickwork.jobs")
    for namespace, kind, count, first, step in groups:
        insert_jobs(
            conn, namespace or None, count, kind=kind, offset=3600 + first - step, step=step
        )
    rows = conn.execute(
        "SELECT id, coalesce(schedule_namespace, ''), kind, run_at <= %s FROM tickwork.jobs"
        " ORDER BY run_at, id",
        (T0,),
    ).fetchall()
    with conn.transaction(force_rollback=True):
        taken = claim(conn, kinds=served, limit=limit)

    ids = [j.id for j in taken]
    assert len(ids) == len(set(ids)), "no job twice"
    eligible = [r for r in rows if r[2] in served and r[3]]
    assert len(taken) == min(limit, len(eligible))
    assert set(ids) <= {r[0] for r in eligible}
    waiting = {r[1] for r in rows if r[2] in served}
    share = limit // len(waiting) if waiting else 0
    for name in waiting:
        its_order = [r[0] for r in eligible if r[1] == name]
        its_taken = {j.id for j in taken if tenant(j) == name}
        assert set(its_order[: len(its_taken)]) == its_taken, f"{name!r}: oldest first"
        assert len(its_taken) >= min(share, len(its_order)), f"{name!r}: its share"


# --- claimers racing ----------------------------------------------------------------------

NAMESPACES = 40
PER_NAMESPACE = 25
CLAIMERS = 4


def _claim_until_empty(url: str, kinds: Sequence[str], results: Any) -> None:
    """Run in a child process: claim batches of 7 (each committed) until a claim finds none."""
    taken: list[int] = []
    with psycopg.connect(url, autocommit=True) as conn:
        while True:
            with conn.transaction():
                got = claim(conn, kinds=kinds, limit=7)
            if not got:
                break
            taken += [j.id for j in got]
    results.put(taken)


def test_claimers_in_several_processes_share_many_namespaces_without_a_duplicate(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    """Four processes claim 40 namespaces' 1,000 jobs (and 1,000 of a kind none serves) at
    once: every job of the served kinds is claimed exactly once, none of the other kind."""
    for n in range(NAMESPACES):
        insert_jobs(conn, f"ns-{n:02d}", PER_NAMESPACE, kind=(KIND, OTHER)[n % 2], offset=n)
        insert_jobs(conn, f"ns-{n:02d}", PER_NAMESPACE, kind=UNSERVED, offset=n)
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    processes = [
        ctx.Process(target=_claim_until_empty, args=(database_url, [KIND, OTHER], results))
        for _ in range(CLAIMERS)
    ]
    for p in processes:
        p.start()
    taken = [job_id for _ in processes for job_id in results.get(timeout=120)]
    for p in processes:
        p.join(timeout=60)
    assert len(taken) == len(set(taken)), "a job claimed twice"
    expected = conn.execute(
        "SELECT id FROM tickwork.jobs WHERE kind <> %s ORDER BY id", (UNSERVED,)
    ).fetchall()
    assert sorted(taken) == [r[0] for r in expected]
    assert conn.execute(
        "SELECT count(*) FROM tickwork.jobs WHERE kind = %s AND status = 'available'",
        (UNSERVED,),
    ).fetchone() == (NAMESPACES * PER_NAMESPACE,)
