"""The real operator (kopf, tickwork's handlers) against kmock's emulator and a real database.

Shared by ``tests/operator/`` and ``tests/firing/``, whose conftests re-export its
fixtures (``cluster``, ``kmock_options``, ``start_operator``). Each test gets its own kmock
server (``cluster``), database and operator thread. kopf runs in a thread with a loop of its
own (the test's loop serves kmock); blocking calls from the test go through
``asyncio.to_thread``. Waiting is polling for the operator's effects with a deadline, never
for time to pass.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import kmock
import psycopg
import pytest
from psycopg.rows import dict_row

from tests.operator.emulator import SCHEDULES, Emulator, kubeconfig, prepare
from tests.support.helpers import wait_until
from tickwork.operator import runner
from tickwork.operator.config import OperatorConfig

DEADLINE = 20.0
POLICIES = "/apis/tickwork.io/v1/tenantpolicies"


class Cluster:
    """The test's side of the API server: write objects through HTTP, read the store."""

    def __init__(self, server: kmock.KubernetesEmulator) -> None:
        self.server = server

    def url(self, namespace: str, name: str | None = None, status: bool = False) -> str:
        path = f"/apis/tickwork.io/v1/namespaces/{namespace}/schedules"
        return path + (f"/{name}" if name else "") + ("/status" if status else "")

    async def create(self, name: str, spec: dict[str, Any], namespace: str = "ns") -> None:
        body = {
            "apiVersion": "tickwork.io/v1",
            "kind": "Schedule",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        }
        async with self.server.post(self.url(namespace), json=body) as response:
            assert response.status < 300, await response.text()

    async def patch(self, name: str, patch: dict[str, Any], namespace: str = "ns") -> None:
        headers = {"Content-Type": "application/merge-patch+json"}
        async with self.server.patch(
            self.url(namespace, name), json=patch, headers=headers
        ) as response:
            assert response.status < 300, await response.text()

    async def create_policy(self, name: str, spec: dict[str, Any]) -> None:
        """A TenantPolicy (cluster-scoped): what the platform admin allows a namespace."""
        body = {"apiVersion": "tickwork.io/v1", "kind": "TenantPolicy", "metadata": {"name": name}}
        async with self.server.post(POLICIES, json={**body, "spec": spec}) as response:
            assert response.status < 300, await response.text()

    async def patch_policy(self, name: str, spec: dict[str, Any]) -> None:
        """A merge patch of a TenantPolicy's spec (as ``kubectl patch --type merge``)."""
        headers = {"Content-Type": "application/merge-patch+json"}
        async with self.server.patch(
            f"{POLICIES}/{name}", json={"spec": spec}, headers=headers
        ) as response:
            assert response.status < 300, await response.text()

    async def delete_policy(self, name: str) -> None:
        async with self.server.delete(f"{POLICIES}/{name}") as response:
            assert response.status < 300, await response.text()

    async def delete(self, name: str, namespace: str = "ns") -> None:
        async with self.server.delete(self.url(namespace, name)) as response:
            assert response.status < 300, await response.text()

    def get(self, name: str, namespace: str = "ns") -> dict[str, Any] | None:
        key = (kmock.resource(SCHEDULES), namespace, name)
        if key not in self.server.objects or self.server.objects[key].deleted:
            return None
        return dict(self.server.objects[key].raw)

    def ready(self, name: str, namespace: str = "ns") -> dict[str, Any] | None:
        """The object's Ready condition, if it has one."""
        body = self.get(name, namespace) or {}
        for condition in body.get("status", {}).get("conditions", []):
            if condition["type"] == "Ready":
                return dict(condition)
        return None

    def events(self, name: str) -> list[dict[str, Any]]:
        return [
            dict(obj.raw)
            for (resource, _, _), obj in self.server.objects.items()
            if resource.plural == "events" and not obj.deleted
            if obj.raw.get("involvedObject", {}).get("name") == name
        ]

    async def wait_ready(self, name: str, reason: str, namespace: str = "ns") -> dict[str, Any]:
        """Wait for the Ready condition with ``reason``; returns the object."""
        await wait_until(
            lambda: (self.ready(name, namespace) or {}).get("reason") == reason,
            timeout=DEADLINE,
            what=f"{name}: Ready reason {reason}",
        )
        body = self.get(name, namespace)
        assert body is not None
        return body


class OperatorThread:
    """One operator run in a thread of its own; ``stop`` waits for it to finish."""

    def __init__(self, config: OperatorConfig) -> None:
        self.config = config
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._main, name="operator", daemon=True)

    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(
                runner.run(self.config, stop_flag=self._stop, ready_flag=self._ready)
            )
        except BaseException as error:
            self._errors.append(error)
        finally:
            self._stop.set()  # releases kopf's thread waiting on it when the run ended by itself
            loop.close()

    async def start(self) -> None:
        self._thread.start()
        await wait_until(
            lambda: self._ready.is_set() or not self._thread.is_alive(),
            timeout=DEADLINE,
            what="the operator to start",
        )
        self.check()

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.to_thread(self._thread.join, DEADLINE)
        assert not self._thread.is_alive(), "the operator did not stop"
        self.check()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def check(self) -> None:
        if self._errors:
            raise self._errors[0]


@pytest.fixture
def kmock_options() -> dict[str, Any]:
    """kmock's fixture options for every test here: our emulator, and server errors fail."""
    return {"cls": Emulator, "strict": True}


@pytest.fixture
async def cluster(
    kmock: kmock.KubernetesEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Cluster:
    prepare(kmock)
    config = tmp_path / "kubeconfig"
    config.write_text(kubeconfig(str(kmock.url)))
    monkeypatch.setenv("KUBECONFIG", str(config))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    return Cluster(kmock)


def operator_config(database_url: str, **overrides: Any) -> OperatorConfig:
    """Fast settings: short intervals, no peering, any free port."""
    base = OperatorConfig(
        database_url,
        standalone=True,
        registry_ttl=1.5,
        start_wait=5.0,
        http_port=0,
        http_host="127.0.0.1",
        status_interval=0.2,
        coalesce_seconds=0.05,
        retry_max_seconds=1.0,
        listing_interval=0.1,
        database_timeout=1.0,
    )
    return replace(base, **overrides)


OperatorFactory = Callable[..., Awaitable[OperatorThread]]


@pytest.fixture
async def start_operator(cluster: Cluster, database_url: str) -> AsyncIterator[OperatorFactory]:
    """``await start_operator(**config_overrides)``: a running operator, stopped after. Each
    has an identity of its own (``operator-1``, ...) unless ``identity`` is given."""
    started: list[OperatorThread] = []

    async def start(**overrides: Any) -> OperatorThread:
        overrides.setdefault("identity", f"operator-{len(started) + 1}")
        thread = OperatorThread(operator_config(database_url, **overrides))
        started.append(thread)
        await thread.start()
        return thread

    yield start
    for thread in started:
        if thread.alive:
            await thread.stop()


def row(url: str, name: str, namespace: str = "ns") -> dict[str, Any] | None:
    with psycopg.connect(url) as conn, conn.cursor(row_factory=dict_row) as cur:
        cur.execute(
            "SELECT * FROM tickwork.schedules WHERE namespace = %s AND name = %s",
            (namespace, name),
        )
        return cur.fetchone()
