"""``TenantPolicy.spec.paused``: pausing schedule namespaces from kubectl. The real operator
(kopf) runs against kmock standing in for the API server, with a real PostgreSQL: a policy set
to ``paused: true`` pauses, through the audited flow code, every schedule namespace it governs
(those named after the Kubernetes namespaces it covers, and its ``scheduleNamespaces``) and
its Schedules say ``Served=False NamespacePaused``; ``false`` or deleting the policy resumes
them. The operator resumes only the pauses it made for a policy, never one a person made from
the command line, and writes no audit record when nothing changes."""

from __future__ import annotations

from typing import Any

import psycopg

import tickwork
from tests.operator.harness import DEADLINE, Cluster, OperatorFactory
from tests.support.helpers import wait_until

HOURLY: dict[str, Any] = {"every": "1h", "job": {"kind": "k"}}
ACTOR = "operator:default/tenantpolicy/freeze"


def paused_by(url: str, namespace: str) -> str | None:
    """Who paused the schedule namespace (None: not paused)."""
    with psycopg.connect(url) as conn:
        found = conn.execute(
            "SELECT paused_by FROM tickwork.pauses WHERE scope = 'namespace' AND name = %s",
            (namespace,),
        ).fetchone()
    return None if found is None else str(found[0])


def audit(url: str, namespace: str) -> list[tuple[str, str, str | None]]:
    """(action, actor, reason) of the pause and resume records of ``namespace``, oldest first."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT action, actor, reason FROM tickwork.audit_log WHERE target = %s ORDER BY id",
            (f"namespace:{namespace}",),
        ).fetchall()
    return [(str(a), str(b), c) for a, b, c in rows]


def served(cluster: Cluster, name: str, namespace: str) -> dict[str, Any]:
    body = cluster.get(name, namespace) or {}
    for condition in body.get("status", {}).get("conditions", []):
        if condition["type"] == "Served":
            return dict(condition)
    return {}


async def wait_paused(url: str, namespace: str, by: str | None) -> None:
    await wait_until(
        lambda: paused_by(url, namespace) == by,
        timeout=DEADLINE,
        what=f"schedule namespace {namespace} paused by {by}",
    )


async def test_spec_paused_pauses_the_governed_namespaces_and_false_or_delete_resumes(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    await cluster.create_policy(
        "freeze", {"namespaces": ["team-a"], "scheduleNamespaces": ["team-a-batch"]}
    )
    await start_operator()
    await cluster.create("nightly", HOURLY, namespace="team-a")
    await cluster.create("batch", {**HOURLY, "scheduleNamespace": "team-a-batch"}, "team-a")
    await cluster.create("other", HOURLY, namespace="team-b")  # not governed: never paused
    for name, namespace in [("nightly", "team-a"), ("batch", "team-a"), ("other", "team-b")]:
        await cluster.wait_ready(name, "Synced", namespace=namespace)
    assert paused_by(database_url, "team-a") is None

    await cluster.patch_policy("freeze", {"paused": True, "pausedReason": "incident 42"})
    await wait_paused(database_url, "team-a", ACTOR)
    await wait_paused(database_url, "team-a-batch", ACTOR)
    await wait_until(
        lambda: served(cluster, "nightly", "team-a").get("reason") == "NamespacePaused",
        timeout=DEADLINE,
        what="nightly: Served NamespacePaused",
    )
    assert served(cluster, "nightly", "team-a")["message"] == (
        f"schedule namespace 'team-a' is paused (by {ACTOR}): its schedules fire nothing until "
        "it is resumed (TenantPolicy 'freeze' sets spec.paused: false)"
    )
    assert paused_by(database_url, "team-b") is None
    assert audit(database_url, "team-a") == [("pause", ACTOR, "incident 42")]

    # Resyncs and unrelated changes re-audit nothing: a new Schedule in the paused namespace
    # (a sync round) and an edit of another field of the policy (a policy event and a round).
    await cluster.create("later", HOURLY, namespace="team-a")
    await cluster.patch_policy("freeze", {"maxPriority": 5})
    await cluster.create("marker", HOURLY, namespace="team-b")
    await cluster.wait_ready("later", "Synced", namespace="team-a")
    await cluster.wait_ready("marker", "Synced", namespace="team-b")
    assert audit(database_url, "team-a") == [("pause", ACTOR, "incident 42")]

    await cluster.patch_policy("freeze", {"paused": False})
    await wait_paused(database_url, "team-a", None)
    await wait_paused(database_url, "team-a-batch", None)
    await wait_until(
        lambda: served(cluster, "nightly", "team-a").get("reason") != "NamespacePaused",
        timeout=DEADLINE,
        what="nightly: Served no longer NamespacePaused",
    )
    assert audit(database_url, "team-a") == [
        ("pause", ACTOR, "incident 42"),
        ("resume", ACTOR, "TenantPolicy 'freeze' no longer pauses it"),
    ]

    # Paused again, then the policy deleted: resumed.
    await cluster.patch_policy("freeze", {"paused": True})
    await wait_paused(database_url, "team-a", ACTOR)
    await cluster.delete_policy("freeze")
    await wait_paused(database_url, "team-a", None)
    assert [action for action, _, _ in audit(database_url, "team-a")] == [
        "pause",
        "resume",
        "pause",
        "resume",
    ]


async def test_a_pause_made_from_the_command_line_is_never_resumed_by_a_policy(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    await cluster.create_policy("freeze", {"namespaces": ["team-a", "team-b"]})
    await start_operator()
    for namespace in ("team-a", "team-b"):
        await cluster.create("nightly", HOURLY, namespace=namespace)
        await cluster.wait_ready("nightly", "Synced", namespace=namespace)
    app = tickwork.App(database_url)
    try:
        app.pause_namespace("team-b", actor="alice", reason="month-end freeze")

        # The policy pauses team-a (the signal that it was applied); team-b stays alice's.
        await cluster.patch_policy("freeze", {"paused": True})
        await wait_paused(database_url, "team-a", ACTOR)
        assert paused_by(database_url, "team-b") == "alice"

        await cluster.patch_policy("freeze", {"paused": False})
        await wait_paused(database_url, "team-a", None)
        assert paused_by(database_url, "team-b") == "alice"
        assert audit(database_url, "team-b") == [("pause", "alice", "month-end freeze")]

        # The other direction: alice's own resume is hers to make, and a policy does not stop it.
        await cluster.patch_policy("freeze", {"paused": True})
        await wait_paused(database_url, "team-a", ACTOR)
        app.resume_namespace("team-b", actor="alice")
        assert paused_by(database_url, "team-b") is None
    finally:
        app.close()


async def test_a_policy_deleted_while_the_operator_was_down_is_resumed_at_its_start(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    await cluster.create_policy("freeze", {"namespaces": ["team-a"], "paused": True})
    first = await start_operator()
    await cluster.create("nightly", HOURLY, namespace="team-a")
    await wait_paused(database_url, "team-a", ACTOR)
    await first.stop()

    await cluster.delete_policy("freeze")
    await start_operator()
    await wait_paused(database_url, "team-a", None)
    assert [action for action, _, _ in audit(database_url, "team-a")] == ["pause", "resume"]
