"""Run now from kubectl: ``kubectl annotate schedule NAME tickwork.io/run-now=TOKEN`` makes
exactly one job per token through the real operator (kmock) and a real database, however often
the annotation is seen: patched again and again, its answer lost from status, the operator
restarted, or seen while the operator cannot reach the database (it waits, and is answered once
the database is back) and while its connections are cut again and again. The job is audited
with the field manager ``managedFields`` names, and answered in ``status.lastRunNow``; a
Schedule that is invalid or loses a NameConflict gets a refusal, never a job, and a bad token
is refused naming the annotation."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row

from tests.db.fault_helpers import CutProxy
from tests.operator.harness import (
    DEADLINE,
    Cluster,
    OperatorFactory,
    OperatorThread,
    operator_config,
)
from tests.support.helpers import wait_until
from tickwork.operator.run_now import ANNOTATION, MAX_TOKEN

SPEC: dict[str, Any] = {"schedule": "0 3 * * *", "suspend": True, "job": {"kind": "s.job"}}
ANNOTATED_AT = "2026-12-02T04:00:00Z"


def annotate(token: str, manager: str = "kubectl-annotate") -> dict[str, Any]:
    """The merge patch ``kubectl annotate --overwrite`` makes, with the managedFields the API
    server keeps (kmock keeps none of its own)."""
    owns = {"f:metadata": {"f:annotations": {f"f:{ANNOTATION}": {}}}}
    return {
        "metadata": {
            "annotations": {ANNOTATION: token},
            "managedFields": [
                {
                    "manager": "kubectl-client-side-apply",
                    "operation": "Update",
                    "time": "2026-12-01T00:00:00Z",
                    "fieldsV1": {"f:spec": {"f:schedule": {}}},
                },
                {
                    "manager": manager,
                    "operation": "Update",
                    "time": ANNOTATED_AT,
                    "fieldsV1": owns,
                },
            ],
        }
    }


def jobs(url: str, namespace: str = "ns", name: str = "nightly") -> list[dict[str, Any]]:
    with psycopg.connect(url) as conn, conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(
            "SELECT id, payload FROM tickwork.jobs"
            " WHERE schedule_namespace = %s AND schedule_name = %s ORDER BY id",
            (namespace, name),
        ).fetchall()


def triggers(url: str) -> list[dict[str, Any]]:
    with psycopg.connect(url) as conn, conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(
            "SELECT actor, target, reason, request_id, details FROM tickwork.audit_log"
            " WHERE action = 'trigger' ORDER BY id"
        ).fetchall()


def last_run_now(cluster: Cluster, name: str = "nightly", namespace: str = "ns") -> dict[str, Any]:
    body = cluster.get(name, namespace) or {}
    return dict(body.get("status", {}).get("lastRunNow") or {})


async def answered(
    cluster: Cluster, token: str, name: str = "nightly", namespace: str = "ns"
) -> dict[str, Any]:
    await wait_until(
        lambda: last_run_now(cluster, name, namespace).get("token") == token,
        timeout=DEADLINE,
        what=f"status.lastRunNow of token {token!r}",
    )
    return last_run_now(cluster, name, namespace)


def run_now_events(cluster: Cluster, name: str, namespace: str = "ns") -> list[str]:
    return [
        event["message"]
        for event in cluster.events(name)
        if event.get("reason") == "RunNowFailed"
        and event.get("involvedObject", {}).get("namespace") == namespace
    ]


async def lose_the_answer(cluster: Cluster, name: str = "nightly", namespace: str = "ns") -> None:
    """Drop status.lastRunNow, as a status rewritten or restored from a backup would."""
    headers = {"Content-Type": "application/merge-patch+json"}
    patch = {"status": {"lastRunNow": None}}
    url = cluster.url(namespace, name, status=True)
    async with cluster.server.patch(url, json=patch, headers=headers) as response:
        assert response.status < 300, await response.text()


async def test_one_token_makes_one_job_however_often_it_is_seen(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    first = await start_operator()
    await cluster.create("nightly", SPEC)
    body = await cluster.wait_ready("nightly", "Synced")
    uid = body["metadata"]["uid"]

    await cluster.patch("nightly", annotate("t1"))
    answer = await answered(cluster, "t1")
    (job,) = jobs(database_url)  # suspended, and yet it ran: a trigger works while suspended
    assert answer["jobId"] == job["id"] and "message" not in answer
    assert answer["time"].endswith("Z")

    # Seen again and again: the same annotation patched, other changes, the answer lost.
    for i in range(5):
        await cluster.patch("nightly", {**annotate("t1"), "metadata": {
            **annotate("t1")["metadata"], "labels": {"round": str(i)}}})  # fmt: skip
    await lose_the_answer(cluster)
    assert (await answered(cluster, "t1"))["jobId"] == job["id"]
    await first.stop()
    await lose_the_answer(cluster)
    await start_operator()
    assert (await answered(cluster, "t1"))["jobId"] == job["id"]
    assert jobs(database_url) == [job]

    (record,) = triggers(database_url)
    assert (record["actor"], record["target"], record["request_id"]) == (
        "kubernetes:kubectl-annotate",
        "schedule:ns/nightly",
        f"{uid}/t1",
    )
    assert record["reason"] == f"annotation {ANNOTATION}"
    assert record["details"] == {
        "job_id": job["id"],
        "kubernetes": {
            "namespace": "ns",
            "name": "nightly",
            "uid": uid,
            "token": "t1",
            "manager": "kubectl-annotate",
            "operation": "Update",
            "time": ANNOTATED_AT,
        },
    }

    # kubectl annotate --overwrite with a new token: a second job.
    await cluster.patch("nightly", annotate("t2", manager="kubectl-edit"))
    second = await answered(cluster, "t2")
    assert [j["id"] for j in jobs(database_url)] == [job["id"], second["jobId"]]
    assert triggers(database_url)[-1]["actor"] == "kubernetes:kubectl-edit"
    assert run_now_events(cluster, "nightly") == []


async def test_a_token_waits_for_the_spec_it_came_with(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    await start_operator()
    await cluster.create("nightly", SPEC)
    await cluster.wait_ready("nightly", "Synced")
    # A new payload and the annotation in one write: the job is the new spec's, once synced.
    new_job = {"kind": "s.job", "payload": {"v": 2}}
    await cluster.patch("nightly", {**annotate("t1"), "spec": {"job": new_job}})
    answer = await answered(cluster, "t1")
    (job,) = jobs(database_url)
    assert (answer["jobId"], job["payload"]) == (job["id"], {"v": 2})


async def test_an_invalid_schedule_and_bad_tokens_are_refused_naming_why(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    await start_operator()
    await cluster.create("broken", {**SPEC, "schedule": "61 * * * *"})
    await cluster.wait_ready("broken", "InvalidSpec")
    await cluster.patch("broken", annotate("t1"))
    answer = await answered(cluster, "t1", "broken")
    assert "jobId" not in answer
    assert answer["message"].startswith("the Schedule is not Ready (InvalidSpec): ")
    await wait_until(
        lambda: answer["message"] in run_now_events(cluster, "broken"),
        what="the RunNowFailed Event",
    )

    await cluster.create("nightly", SPEC)
    await cluster.wait_ready("nightly", "Synced")
    for token, says in [
        ("x" * (MAX_TOKEN + 1), f"the token has {MAX_TOKEN + 1} characters, at most {MAX_TOKEN}"),
        ("", "the token is empty"),
    ]:
        await cluster.patch("nightly", annotate(token))
        message = (await answered(cluster, token))["message"]
        assert message.startswith(f"metadata.annotations[{ANNOTATION}]: {says}"), message
    assert jobs(database_url) == [] and triggers(database_url) == []
    await cluster.patch("nightly", annotate("x" * MAX_TOKEN))  # the longest accepted
    assert "jobId" in await answered(cluster, "x" * MAX_TOKEN)


async def test_the_loser_of_a_name_conflict_never_runs_the_winners_schedule(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    await cluster.create_policy(
        "shared", {"namespaces": ["team-*"], "scheduleNamespaces": ["shared", "team-*"]}
    )
    await start_operator()
    await cluster.create("nightly", {**SPEC, "scheduleNamespace": "shared"}, "team-z")
    await cluster.wait_ready("nightly", "Synced", namespace="team-z")
    await cluster.create("nightly", {**SPEC, "scheduleNamespace": "shared"}, "team-a")
    await cluster.wait_ready("nightly", "NameConflict", namespace="team-a")

    await cluster.patch("nightly", annotate("t1"), namespace="team-a")
    answer = await answered(cluster, "t1", namespace="team-a")
    assert "jobId" not in answer and "NameConflict" in answer["message"]
    assert jobs(database_url, "shared") == [] and triggers(database_url) == []
    # The winner's own token runs it.
    await cluster.patch("nightly", annotate("t1"), namespace="team-z")
    assert (await answered(cluster, "t1", namespace="team-z"))["jobId"] == (
        jobs(database_url, "shared")[0]["id"]
    )


SLOW_COMMIT = """
CREATE FUNCTION public.slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_sleep(1);
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON tickwork.audit_log
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION public.slow_commit();
"""
"""Every audit record's transaction takes a second to commit (the trigger is its last step)."""


def committing(conn: psycopg.Connection[Any]) -> bool:
    """A session of the database is inside SLOW_COMMIT's sleep."""
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND wait_event = 'PgSleep'"
    ).fetchone()
    return bool(row and row[0])


async def test_a_token_seen_while_the_database_is_down_makes_one_job_once_it_is_back(
    cluster: Cluster, database_url: str
) -> None:
    """The operator reaches PostgreSQL through a TCP proxy that the test takes down: the token
    annotated (and annotated again) meanwhile waits, with a Warning Event saying why, and once
    the database is reachable again it makes exactly one job. A second token answered while
    its connection is cut while its transaction commits makes one job too (a trigger whose answer
    was lost with its connection is replayed by its request id, not repeated)."""
    where = conninfo_to_dict(database_url)
    proxy = CutProxy(str(where["host"]), int(str(where["port"])))
    operator = OperatorThread(operator_config(make_conninfo(database_url, port=proxy.port)))
    await operator.start()
    try:
        await cluster.create("nightly", SPEC)
        await cluster.wait_ready("nightly", "Synced")

        proxy.down()
        await cluster.patch("nightly", annotate("t1"))
        await wait_until(
            lambda: any("'t1' waits" in m for m in run_now_events(cluster, "nightly")),
            timeout=DEADLINE,
            what="the token to wait for the database",
        )
        # One per status round while it waits (a loaded machine may see a second round here).
        waiting = run_now_events(cluster, "nightly")
        assert waiting and all("'t1' waits" in m for m in waiting), waiting
        assert all("database unavailable" in m.lower() for m in waiting), waiting
        await cluster.patch("nightly", annotate("t1"))  # annotated again while down
        await cluster.wait_ready("nightly", "DatabaseUnavailable")
        assert jobs(database_url) == [] and last_run_now(cluster) == {}

        proxy.up()
        answer = await answered(cluster, "t1")
        (job,) = jobs(database_url)
        assert answer["jobId"] == job["id"] and "message" not in answer
        await lose_the_answer(cluster)
        assert (await answered(cluster, "t1"))["jobId"] == job["id"]
        assert [record["request_id"].split("/")[-1] for record in triggers(database_url)] == ["t1"]

        # The answer lost: the trigger's transaction commits while its connection is cut
        # (a deferred trigger holds the COMMIT a second; the cut comes meanwhile), so the
        # operator sees an error although the job exists. Its retry finds the request id.
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute(SLOW_COMMIT)
            await cluster.patch("nightly", annotate("t2"))
            await wait_until(
                lambda: committing(conn), timeout=DEADLINE, what="the trigger's COMMIT"
            )
            assert proxy.cut() >= 1
            await wait_until(lambda: not committing(conn), timeout=DEADLINE, what="COMMIT done")
        second = await answered(cluster, "t2")
        # The operator did see the failure of that answer (and tried again).
        assert any("'t2' waits" in m for m in run_now_events(cluster, "nightly"))
        assert [j["id"] for j in jobs(database_url)] == [job["id"], second["jobId"]]
        tokens = [record["request_id"].split("/")[-1] for record in triggers(database_url)]
        assert tokens == ["t1", "t2"]
    finally:
        await asyncio.wait_for(operator.stop(), DEADLINE)
        proxy.close()
