"""Operators own only their scope: two real operators with the same cluster name watching
different Kubernetes namespaces (``--namespace team-a``, ``--namespace team-b``) against one API
server and one database never disable each other's schedules, whichever restarts; an operator
whose scope overlaps a live one's refuses to start; one killed without cleanup blocks nobody
once its registry entry expired."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.operator.harness import Cluster, OperatorFactory, row
from tests.support.helpers import wait_until
from tickwork.operator.registry import OperatorConflict

TICKWORK = str(Path(sys.executable).parent / "tickwork")
SPEC: dict[str, Any] = {"schedule": "0 * * * *", "job": {"kind": "s.job"}}
TTL = 1.5
"""Registry entry lifetime of every operator here (the harness uses the same)."""


def enabled(url: str, namespace: str, name: str) -> tuple[bool, int] | None:
    stored = row(url, name, namespace)
    return None if stored is None else (stored["enabled"], stored["revision"])


def registered(url: str) -> dict[str, list[str]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT identity, scope FROM tickwork.operators").fetchall()
    return {identity: scope for identity, scope in rows}


async def forget(cluster: Cluster, name: str, namespace: str) -> None:
    """Delete for good while no operator runs (its finalizer removed by hand)."""
    await cluster.patch(name, {"metadata": {"finalizers": None}}, namespace=namespace)
    await cluster.delete(name, namespace=namespace)


async def tickwork_operator(url: str, *args: str) -> asyncio.subprocess.Process:
    """``tickwork operator`` in a process of its own, against the test's kmock (KUBECONFIG)."""
    return await asyncio.create_subprocess_exec(
        TICKWORK,
        "operator",
        f"--database-url={url}",
        "--standalone",
        "--http-port=0",
        f"--registry-ttl={TTL}",
        *args,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )


async def test_disjoint_scopes_never_disable_each_other(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    url = database_url
    await cluster.create_policy(
        "a", {"namespaces": ["team-a"], "scheduleNamespaces": ["reports-a"]}
    )
    a = await start_operator(namespaces=("team-a",), identity="a")
    b = await start_operator(namespaces=("team-b",), identity="b")
    await cluster.create("kept", SPEC, namespace="team-a")
    await cluster.create("gone", SPEC, namespace="team-a")
    await cluster.create("report", {**SPEC, "scheduleNamespace": "reports-a"}, namespace="team-a")
    await cluster.create("b1", SPEC, namespace="team-b")
    await cluster.create("outside", SPEC, namespace="team-c")  # nobody watches team-c
    for name, namespace in (("kept", "team-a"), ("gone", "team-a"), ("report", "team-a")):
        await cluster.wait_ready(name, "Synced", namespace=namespace)
    await cluster.wait_ready("b1", "Synced", namespace="team-b")
    a_rows = [("team-a", "kept"), ("team-a", "gone"), ("reports-a", "report")]
    assert all(enabled(url, ns, n) == (True, 1) for ns, n in a_rows)
    assert cluster.ready("outside", namespace="team-c") is None
    assert row(url, "outside", "team-c") is None

    # B restarts: its first round prunes only team-b, not what A synced.
    await b.stop()
    b = await start_operator(namespaces=("team-b",), identity="b")
    await cluster.create("b2", SPEC, namespace="team-b")
    await cluster.wait_ready("b2", "Synced", namespace="team-b")  # B's first rounds are done
    assert all(enabled(url, ns, n) == (True, 1) for ns, n in a_rows)

    # A is down while two of its Schedules are deleted for good: its restart prunes them (also
    # in reports-a, which only its Schedule named), and nothing of B's.
    await a.stop()
    await forget(cluster, "gone", "team-a")
    await forget(cluster, "report", "team-a")
    a = await start_operator(namespaces=("team-a",), identity="a")
    await wait_until(
        lambda: (
            enabled(url, "team-a", "gone") == (False, 2)
            and enabled(url, "reports-a", "report") == (False, 2)
        ),
        what="the Schedules deleted while A was down to be disabled",
    )
    assert enabled(url, "team-a", "kept") == (True, 1)
    assert enabled(url, "team-b", "b1") == (True, 1)
    assert enabled(url, "team-b", "b2") == (True, 1)
    assert (cluster.ready("b1", namespace="team-b") or {}).get("status") == "True"
    assert registered(url) == {"a": ["team-a"], "b": ["team-b"]}

    # Later changes stay within each scope too.
    await cluster.patch("b1", {"spec": {"schedule": "30 * * * *"}}, namespace="team-b")
    await wait_until(lambda: enabled(url, "team-b", "b1") == (True, 2), what="b1 updated")
    assert enabled(url, "team-a", "kept") == (True, 1)


async def test_a_schedule_namespace_another_scope_synced_is_refused(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    await cluster.create_policy(
        "shared", {"namespaces": ["team-*"], "scheduleNamespaces": ["shared"]}
    )
    await start_operator(namespaces=("team-a",), identity="a")
    await start_operator(namespaces=("team-b",), identity="b")
    await cluster.create("x", {**SPEC, "scheduleNamespace": "shared"}, namespace="team-a")
    await cluster.wait_ready("x", "Synced", namespace="team-a")
    await cluster.create("y", {**SPEC, "scheduleNamespace": "shared"}, namespace="team-b")
    body = await cluster.wait_ready("y", "NamespaceOwnedElsewhere", namespace="team-b")
    message = body["status"]["conditions"][0]["message"]
    assert "'shared'" in message and "team-a" in message, message
    assert enabled(database_url, "shared", "x") == (True, 1)
    assert row(database_url, "y", "shared") is None


async def test_an_overlapping_operator_refuses_to_start(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    await start_operator(namespaces=("team-a",), identity="a")
    await cluster.create("kept", SPEC, namespace="team-a")
    await cluster.wait_ready("kept", "Synced", namespace="team-a")

    same = await tickwork_operator(database_url, "--namespace=team-a", "--start-wait=0")
    everything = await tickwork_operator(database_url, "--start-wait=0")
    for process in (same, everything):
        _, stderr = await asyncio.wait_for(process.communicate(), 30)
        lines = stderr.decode().strip().splitlines()
        assert process.returncode == 1, lines
        # Besides the start-up's connection budget (one INFO line): the one error line.
        *before, error = lines
        assert all(" INFO " in line and "connection budget" in line for line in before), lines
        assert len(before) <= 1, lines
        assert error.startswith("tickwork: error: operator not started: another operator"), lines
        assert "'a'" in error and "namespaces team-a" in error, lines
    assert set(registered(database_url)) == {"a"}
    assert enabled(database_url, "team-a", "kept") == (True, 1)


async def test_a_killed_operator_blocks_no_replacement(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    # An operator process, killed (no cleanup) once registered: its entry stays until it expires.
    process = await tickwork_operator(database_url, "--namespace=team-a", "--identity=pod-1")
    try:
        await wait_until(lambda: "pod-1" in registered(database_url), timeout=30)
    finally:
        process.send_signal(signal.SIGKILL)
        await process.wait()
    assert "pod-1" in registered(database_url)

    started = time.monotonic()
    await start_operator(namespaces=("team-a",), identity="pod-2", start_wait=4 * TTL)
    assert time.monotonic() - started < 4 * TTL
    assert set(registered(database_url)) == {"pod-2"}
    await cluster.create("after", SPEC, namespace="team-a")
    await cluster.wait_ready("after", "Synced", namespace="team-a")


async def test_a_start_under_a_live_identity_replaces_it_and_the_old_run_stops(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    old = await start_operator(namespaces=("team-a",), identity="pod")
    await start_operator(namespaces=("team-a",), identity="pod", start_wait=0)  # at once
    await wait_until(lambda: not old.alive, timeout=4 * TTL, what="the old run to stop")
    with pytest.raises(OperatorConflict, match="replaced it"):
        old.check()
