"""Failover: two ``tickwork operator`` processes of one kopf peering object (as the chart's two
replicas run), against one API server (kmock, with kopf's peering resources) and one database.

Both start at once; the older one is active (its priority derives from its start time), the
other waits as the standby: it syncs nothing, yet its admission webhook answers and its
``/readyz`` is ready.
The active one is killed with SIGKILL (no goodbye in the peering object, its lifetime has to run
out) and a Schedule is edited right after: the edit reaches ``tickwork.schedules`` within 15 s
of the kill, with the chart's peering settings (``--peering-lifetime`` 10, the default), and the
takeover disables, prunes or re-revisions no other Schedule.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
import ssl
import sys
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import prometheus_client
import psycopg
import pytest

from tests.operator.emulator import PEERINGS, add_peering
from tests.operator.harness import Cluster, OperatorFactory
from tests.support.helpers import wait_until
from tickwork.operator import webhook

TICKWORK = str(Path(sys.executable).parent / "tickwork")
SPEC: dict[str, Any] = {"schedule": "0 3 * * *", "job": {"kind": "f.job"}}
NAMES = ("f1", "f2", "f3", "f4")
TAKEOVER_SECONDS = 15.0
"""Issue 31: an edit made when the active operator dies reaches PostgreSQL within this long."""
START_SECONDS = 30.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Operator:
    """One ``tickwork operator`` process; its JSON log records are collected as they come."""

    def __init__(self, name: str, process: asyncio.subprocess.Process, http: int, hook: int):
        self.name = name
        self.process = process
        self.http_port = http
        self.webhook_port = hook
        self.records: list[dict[str, Any]] = []
        self.lines: list[str] = []
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.process.stderr is not None
        async for raw in self.process.stderr:
            line = raw.decode(errors="replace").rstrip()
            self.lines.append(line)
            with contextlib.suppress(ValueError):
                self.records.append(json.loads(line))

    def said(self, action: str) -> bool:
        return any(record.get("action") == action for record in self.records)

    @property
    def role(self) -> str | None:
        """What it last said it is: ``active``, ``standby``, or None (nothing yet)."""
        roles = [r["action"] for r in self.records if r.get("action") in ("active", "standby")]
        return roles[-1] if roles else None

    def log(self) -> str:
        return "\n".join(self.lines[-40:])

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), 20)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


@pytest.fixture
async def peering(cluster: Cluster) -> Cluster:
    """kopf's peering resource in discovery, and the ClusterKopfPeering ``tickwork``."""
    await add_peering(cluster.server)
    return cluster


@pytest.fixture
async def operators(
    peering: Cluster, database_url: str, certificate: tuple[Path, Path]
) -> AsyncIterator[list[Operator]]:
    started: list[Operator] = []
    yield started
    for operator in started:
        await operator.stop()


async def start(
    started: list[Operator], name: str, url: str, certificate: tuple[Path, Path]
) -> Operator:
    http, hook = free_port(), free_port()
    process = await asyncio.create_subprocess_exec(
        TICKWORK,
        "operator",
        f"--database-url={url}",
        f"--identity={name}",
        f"--http-port={http}",
        "--http-host=127.0.0.1",
        "--webhook",
        f"--webhook-port={hook}",
        "--webhook-addr=127.0.0.1",
        f"--webhook-cert-file={certificate[0]}",
        f"--webhook-key-file={certificate[1]}",
        "--log-format=json",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    operator = Operator(name, process, http, hook)
    started.append(operator)
    return operator


def rows(url: str) -> dict[str, tuple[bool, int, str]]:
    """name: (enabled, revision, schedule) of every stored definition."""
    with psycopg.connect(url) as conn:
        found = conn.execute(
            "SELECT name, enabled, revision, spec->>'schedule' FROM tickwork.schedules"
        ).fetchall()
    return {name: (enabled, revision, cron) for name, enabled, revision, cron in found}


async def review(operator: Operator, cert: Path, spec: dict[str, Any]) -> bool:
    """Whether the operator's webhook admits a CREATE of a Schedule with ``spec``."""
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "uid-1",
            "operation": "CREATE",
            "userInfo": {"username": "tenant"},
            "resource": {"group": "tickwork.io", "version": "v1", "resource": "schedules"},
            "kind": {"group": "tickwork.io", "version": "v1", "kind": "Schedule"},
            "object": {
                "apiVersion": "tickwork.io/v1",
                "kind": "Schedule",
                "metadata": {"name": "probe", "namespace": "ns"},
                "spec": spec,
            },
            "oldObject": None,
            "dryRun": False,
        },
    }
    context = ssl.create_default_context(cafile=str(cert))
    url = f"https://127.0.0.1:{operator.webhook_port}/{webhook.HANDLER_ID}"
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=json.dumps(body), ssl=context) as response,
    ):
        assert response.status == 200, await response.text()
        return bool((await response.json())["response"]["allowed"])


async def readyz(operator: Operator) -> int:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{operator.http_port}/readyz") as response,
    ):
        return response.status


async def test_the_standby_takes_over_a_killed_operator_within_15_seconds(
    peering: Cluster,
    operators: list[Operator],
    database_url: str,
    certificate: tuple[Path, Path],
) -> None:
    cluster, url = peering, database_url
    both = [await start(operators, name, url, certificate) for name in ("a", "b")]

    def settled() -> bool:
        assert all(o.process.returncode is None for o in both), "\n".join(o.log() for o in both)
        return sorted(str(o.role) for o in both) == ["active", "standby"]

    await wait_until(settled, timeout=START_SECONDS, what="one active operator, one standby")
    active, standby = both if both[0].role == "active" else both[::-1]
    synced = len(standby.records)  # (started at once, it may have been active for a moment)

    for name in NAMES:
        await cluster.create(name, SPEC)
    await wait_until(lambda: len(rows(url)) == len(NAMES), what="the Schedules in PostgreSQL")
    await cluster.wait_ready("f4", "Synced")  # the active one's status loop runs

    # The standby: no activity of its own, yet ready, and its webhook validates.
    later = standby.records[synced:]
    assert not [r for r in later if r.get("action") in ("active", "sync")], standby.log()
    assert await readyz(standby) == 200
    assert await review(standby, certificate[0], SPEC)
    assert not await review(standby, certificate[0], {**SPEC, "schedule": "0 3 * *"})

    before = rows(url)
    assert all(enabled and revision == 1 for enabled, revision, _ in before.values())
    active.process.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    await cluster.patch("f1", {"spec": {"schedule": "30 4 * * *"}})

    await wait_until(
        lambda: rows(url)["f1"][2] == "30 4 * * *",
        timeout=2 * TAKEOVER_SECONDS,
        what="the edit of f1 in PostgreSQL",
    )
    took = time.monotonic() - killed
    assert took < TAKEOVER_SECONDS, f"the edit took {took:.1f}s after the kill\n{standby.log()}"
    assert standby.role == "active"

    after = rows(url)
    assert after["f1"] == (True, 2, "30 4 * * *")
    assert {n: r for n, r in after.items() if n != "f1"} == {
        n: r for n, r in before.items() if n != "f1"
    }, "the takeover changed other Schedules"
    print(f"takeover: the edit reached PostgreSQL {took:.1f}s after the kill")


def active_gauge() -> float | None:
    """``tickwork_operator_active`` of the operator running in this process (a thread)."""
    return prometheus_client.REGISTRY.get_sample_value("tickwork_operator_active")


async def freeze(cluster: Cluster, priority: int | None) -> None:
    """Another peer of ``priority`` (None: gone) in the peering object, as ``kopf freeze``."""
    lastseen = datetime.now(UTC).isoformat()
    peer = (
        None if priority is None else {"priority": priority, "lifetime": 600, "lastseen": lastseen}
    )
    headers = {"Content-Type": "application/merge-patch+json"}
    async with cluster.server.patch(
        f"/apis/{PEERINGS}/tickwork", json={"status": {"freezer": peer}}, headers=headers
    ) as response:
        assert response.status < 300, await response.text()


async def test_an_operator_active_again_after_a_pause_syncs_what_changed_meanwhile(
    peering: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    """An active operator paused by a peer of a higher priority (``kopf freeze``), and resumed:
    kopf's index still holds what it saw before. What changed meanwhile (one Schedule edited,
    one deleted for good while nobody held its finalizer) reaches PostgreSQL; the others are
    not written at all."""
    cluster, url = peering, database_url
    operator = await start_operator(standalone=False)
    for name in ("kept", "edited", "gone"):
        await cluster.create(name, SPEC)
    await wait_until(lambda: len(rows(url)) == 3, what="the Schedules in PostgreSQL")
    await freeze(cluster, 100)
    await wait_until(lambda: active_gauge() == 0, what="the operator to pause")
    await cluster.patch("edited", {"spec": {"schedule": "30 4 * * *"}})
    await cluster.patch("gone", {"metadata": {"finalizers": None}})
    await cluster.delete("gone")
    before = rows(url)
    await freeze(cluster, None)
    await wait_until(
        lambda: rows(url)["edited"][2] == "30 4 * * *" and not rows(url)["gone"][0],
        what="the edit and the deletion in PostgreSQL",
    )
    after = rows(url)
    assert after["kept"] == before["kept"] == (True, 1, "0 3 * * *")
    assert after["edited"] == (True, 2, "30 4 * * *")
    assert after["gone"] == (False, 2, "0 3 * * *")
    assert operator.alive
