"""The operator under a burst: N Schedules created at once, until all are in PostgreSQL.

    python bench/operator_sync.py --schedules 1000
    python bench/operator_sync.py --schedules 5000

Runs the real operator (kopf and tickwork's handlers, in a thread of its own, as in the
tests) against kmock's Kubernetes emulator (``tests/operator/emulator.py``) and a database of
its own (on the server of ``--database-url``, or a private PostgreSQL with its default
durability).
Named ``operator_sync.py``, not ``operator.py``: a script's folder comes first on
``sys.path``, and a file ``operator.py`` there would shadow the standard library's.

Creates N Schedules in one namespace as fast as the API accepts them (``--concurrency``
requests in flight), then prints the time until all N are enabled in ``tickwork.schedules``,
the number of sync transactions the operator used (``tickwork_operator_syncs_total``), and the
time until every object's status reports ``Ready=True``. The time starts with the first create
request.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import kmock
import prometheus_client
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import servers

from tests.operator.emulator import SCHEDULES, Emulator, kubeconfig, prepare
from tickwork.db import migrate
from tickwork.operator import runner
from tickwork.operator.config import OperatorConfig

NAMESPACE = "bench"
TIMEOUT = 600.0


def enabled_count(url: str, namespace: str = NAMESPACE) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM tickwork.schedules WHERE namespace = %s AND enabled",
            (namespace,),
        ).fetchone()
    assert row is not None
    return int(row[0])


def syncs() -> float:
    total = 0.0
    for result in ("success", "invalid", "owned_elsewhere", "database_error"):
        labels = {"schedule_namespace": NAMESPACE, "result": result}
        total += (
            prometheus_client.REGISTRY.get_sample_value("tickwork_operator_syncs_total", labels)
            or 0.0
        )
    return total


def ready_count(server: kmock.KubernetesEmulator) -> int:
    resource = kmock.resource(SCHEDULES)
    count = 0
    for (res, namespace, _), obj in list(server.objects.items()):
        if res != resource or namespace != NAMESPACE or obj.deleted:
            continue
        conditions = obj.raw.get("status", {}).get("conditions", [])
        count += any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
    return count


async def create(server: kmock.KubernetesEmulator, namespace: str, i: int) -> None:
    body = {
        "apiVersion": "tickwork.io/v1",
        "kind": "Schedule",
        "metadata": {"name": f"s{i:05d}", "namespace": namespace},
        "spec": {"schedule": f"{i % 60} * * * *", "job": {"kind": "bench.tick"}},
    }
    url = f"/apis/tickwork.io/v1/namespaces/{namespace}/schedules"
    async with server.post(url, json=body) as response:
        assert response.status < 300, await response.text()


async def create_all(server: kmock.KubernetesEmulator, count: int, concurrency: int) -> None:
    queue = iter(range(count))

    async def creator() -> None:
        for i in queue:
            await create(server, NAMESPACE, i)

    await asyncio.gather(*(creator() for _ in range(concurrency)))


async def wait_for(condition, what: str, *, blocking: bool = True) -> float:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + TIMEOUT
    reported = time.monotonic()
    while not (await asyncio.to_thread(condition) if blocking else condition()):
        if time.monotonic() - reported > 10:
            print(f"  still waiting for {what}...", file=sys.stderr, flush=True)
            reported = time.monotonic()
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)
    return time.monotonic()


async def bench(url: str, count: int, concurrency: int, status_interval: float) -> None:
    async with Emulator() as server, kmock.Server(server):
        prepare(server)
        with tempfile.NamedTemporaryFile("w", suffix=".kubeconfig", delete=False) as config:
            config.write(kubeconfig(str(server.url)))
        os.environ["KUBECONFIG"] = config.name
        os.environ.pop("KUBERNETES_SERVICE_HOST", None)
        settings = OperatorConfig(
            url,
            standalone=True,
            http_port=0,
            http_host="127.0.0.1",
            status_interval=status_interval,
        )
        stop, ready = threading.Event(), threading.Event()
        thread = threading.Thread(
            target=lambda: asyncio.run(runner.run(settings, stop_flag=stop, ready_flag=ready)),
            daemon=True,
        )
        thread.start()
        await asyncio.to_thread(ready.wait, 30)
        await create(server, "warm-up", 0)  # synced: the operator's start-up is over
        await wait_for(lambda: enabled_count(url, "warm-up") == 1, "the warm-up Schedule")

        started = time.monotonic()
        await create_all(server, count, concurrency)
        created = time.monotonic()
        stored = await wait_for(lambda: enabled_count(url) == count, "all in PostgreSQL")
        statuses = await wait_for(
            lambda: ready_count(server) == count, "every status Ready", blocking=False
        )
        transactions = syncs()  # read late: a commit is seen before the counter moves
        print(f"schedules created at once:        {count}")
        print(f"all create requests answered:      {created - started:.2f} s")
        print(f"all {count} in PostgreSQL:          {stored - started:.2f} s")
        print(f"sync transactions used:            {transactions:.0f}")
        print(
            f"every status Ready=True:           {statuses - started:.2f} s "
            f"(status interval {status_interval:g} s)"
        )
        stop.set()
        await asyncio.to_thread(thread.join, 60)
        os.unlink(config.name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=50, help="create requests in flight")
    parser.add_argument("--status-interval", type=float, default=10.0)
    servers.add_arguments(parser)
    args = parser.parse_args()
    with servers.database_server(args.database_url) as url:
        migrate.apply(url)
        asyncio.run(bench(url, args.schedules, args.concurrency, args.status_interval))


if __name__ == "__main__":
    main()
