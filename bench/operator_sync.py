"""The operator under a burst: N Schedules created at once, until all are in PostgreSQL.

    python bench/operator_sync.py --schedules 1000
    python bench/operator_sync.py --schedules 5000
    python bench/operator_sync.py --schedules 5000 --namespaces 50

Runs the real operator (``tickwork operator``, a process of its own, as in a cluster) against
kmock's Kubernetes emulator (``tests/operator/emulator.py``, served by this process) and a
database of its own (on the server of ``--database-url``, or a private PostgreSQL with its
default durability).
Named ``operator_sync.py``, not ``operator.py``: a script's folder comes first on
``sys.path``, and a file ``operator.py`` there would shadow the standard library's.

The operator runs as the chart runs it: in the kopf peering ``tickwork`` (kmock serves the
peering resource; the operator is alone in it, so active), or with ``--standalone``.

Creates N Schedules as fast as the API accepts them (``--concurrency`` requests in flight),
in one namespace or spread evenly over ``--namespaces`` (``bench-00``, ``bench-01``, ...), then
prints the time until all N are enabled in ``tickwork.schedules``,
the number of sync transactions the operator used (``tickwork_operator_syncs_total``), the
time until every object shows a status and until every status reports ``Ready=True``, the
requests the operator sent to the API server per Schedule (status patches, other patches,
Events), the CPU time the operator process used for the burst and its memory (RSS before the
burst, after it, and its peak). The time starts with the first create request. A worker row
that stays live stands for the fleet, so statuses say ``Served=True`` as in a cluster with
workers (without one, every Schedule also gets a ``NoWorker`` Warning Event).

The machine is shared: the CPU seconds are the steadier figure when the load is high.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import IO

import aiohttp.web
import kmock
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import servers

from tests.operator.emulator import SCHEDULES, Emulator, add_peering, kubeconfig, prepare
from tickwork.db import migrate

NAMESPACE = "bench"
TIMEOUT = 600.0
STOP_SECONDS = 30.0
"""The operator's graceful stop may take this long; then it is killed."""


def namespaces(count: int) -> list[str]:
    """The benchmark's namespaces: ``bench`` alone, or ``bench-00`` ... when there are more."""
    return [NAMESPACE] if count == 1 else [f"{NAMESPACE}-{i:02d}" for i in range(count)]


def enabled_count(url: str, names: list[str]) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM tickwork.schedules WHERE namespace = ANY(%s) AND enabled",
            (names,),
        ).fetchone()
    assert row is not None
    return int(row[0])


def scrape(port: int) -> dict[str, float]:
    """The operator's /metrics samples, by their line's name and labels."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


def syncs(samples: dict[str, float], names: list[str]) -> float:
    return sum(
        value
        for name, value in samples.items()
        if name.startswith("tickwork_operator_syncs_total{")
        and any(f'schedule_namespace="{namespace}"' in name for namespace in names)
    )


def memory(pid: int) -> tuple[int, int]:
    """The process's resident set now and at its peak, in bytes (Linux /proc)."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.split()
    return int(fields["VmRSS"][0]) * 1024, int(fields["VmHWM"][0]) * 1024


def cpu_seconds(pid: int) -> float:
    """User and system CPU time the process used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


_FLEET = """
INSERT INTO tickwork.workers (name, queues, kinds, namespaces, concurrency, host, pid,
                              started_at, last_seen_at)
VALUES ('bench-fleet', '{default}', '{bench.tick}', %s, 1, 'bench', 0, now(),
        now() + interval '1 day')
"""


def add_fleet(url: str, names: list[str]) -> None:
    """A worker seen "in the future": live for the whole run, offering the namespaces."""
    with psycopg.connect(url) as conn:
        conn.execute(_FLEET, ([*names, "warm-up"],))


class CountingEmulator(Emulator):
    """The emulator, counting the requests it serves by what they do."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.counts: Counter[str] = Counter()

    async def _handle(self, request: kmock.Request) -> aiohttp.web.StreamResponse:
        resource = request.resource.plural if request.resource is not None else "-"
        what = f"{request.action} {resource}" + (
            f"/{request.subresource}" if request.subresource else ""
        )
        self.counts[what] += 1
        return await super()._handle(request)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def status_count(server: kmock.KubernetesEmulator, names: list[str]) -> tuple[int, int]:
    """Objects of the benchmark's namespaces with a Ready condition, and with Ready=True."""
    resource = kmock.resource(SCHEDULES)
    wanted = set(names)
    shown = ready = 0
    for (res, namespace, _), obj in list(server.objects.items()):
        if res != resource or namespace not in wanted or obj.deleted:
            continue
        conditions = obj.raw.get("status", {}).get("conditions", [])
        found = [c for c in conditions if c["type"] == "Ready"]
        shown += bool(found)
        ready += any(c["status"] == "True" for c in found)
    return shown, ready


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


async def create_all(
    server: kmock.KubernetesEmulator, count: int, names: list[str], concurrency: int
) -> None:
    """``count`` Schedules, dealt round the namespaces in turn."""
    queue = iter(range(count))

    async def creator() -> None:
        for i in queue:
            await create(server, names[i % len(names)], i)

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


def start_operator(
    url: str, kubeconfig_path: str, port: int, args: argparse.Namespace, log: IO[bytes]
) -> subprocess.Popen[bytes]:
    """``tickwork operator`` as its own process: in the peering ``tickwork`` (the chart's
    default; alone in it, so active), or ``--standalone``."""
    env = {**os.environ, "KUBECONFIG": kubeconfig_path}
    env.pop("KUBERNETES_SERVICE_HOST", None)
    command = [
        sys.executable,
        "-c",
        "import sys; from tickwork.cli import main; sys.exit(main())",
        "operator",
        "--database-url",
        url,
        *(["--standalone"] if args.standalone else []),
        "--http-host",
        "127.0.0.1",
        "--http-port",
        str(port),
        "--status-interval",
        str(args.status_interval),
        "--log-level",
        args.log_level,
    ]
    return subprocess.Popen(command, env=env, stderr=log)


async def bench(url: str, args: argparse.Namespace) -> None:
    with tempfile.TemporaryFile() as log:
        await run(url, args, log)


async def run(url: str, args: argparse.Namespace, log: IO[bytes]) -> None:
    count = args.schedules
    names = namespaces(args.namespaces)
    async with CountingEmulator() as server, kmock.Server(server):
        prepare(server)
        if not args.standalone:
            await add_peering(server)
        with tempfile.NamedTemporaryFile("w", suffix=".kubeconfig", delete=False) as config:
            config.write(kubeconfig(str(server.url)))
        port = free_port()
        operator = start_operator(url, config.name, port, args, log)
        try:
            await create(server, "warm-up", 0)  # synced: the operator's start-up is over
            await wait_for(lambda: enabled_count(url, ["warm-up"]) == 1, "the warm-up Schedule")
            rss_idle, _ = memory(operator.pid)
            logged_before = log.tell()
            cpu_idle = cpu_seconds(operator.pid)
            requests_before = Counter(server.counts)

            started = time.monotonic()
            await create_all(server, count, names, args.concurrency)
            created = time.monotonic()
            stored = await wait_for(lambda: enabled_count(url, names) == count, "all in PostgreSQL")
            shown = await wait_for(
                lambda: status_count(server, names)[0] == count, "every status", blocking=False
            )
            ready = await wait_for(
                lambda: status_count(server, names)[1] == count,
                "every status Ready",
                blocking=False,
            )
            await asyncio.sleep(args.status_interval * 2)  # rounds with nothing to patch
            samples = await asyncio.to_thread(scrape, port)
            rss_end, rss_peak = memory(operator.pid)
            cpu = cpu_seconds(operator.pid) - cpu_idle
            requests = server.counts - requests_before
            log.seek(logged_before)
            logged = log.read().count(b"\n")
        finally:
            operator.send_signal(signal.SIGTERM)
            try:
                await asyncio.to_thread(operator.wait, STOP_SECONDS)
            except subprocess.TimeoutExpired:
                operator.kill()
                await asyncio.to_thread(operator.wait)
            os.unlink(config.name)
    mib = 1024 * 1024
    peering = "--standalone" if args.standalone else "peering tickwork"
    print(f"schedules created at once:        {count} in {len(names)} namespace(s), {peering}")
    print(f"all create requests answered:      {created - started:.2f} s")
    print(f"all {count} in PostgreSQL:          {stored - started:.2f} s")
    print(f"sync transactions used:            {syncs(samples, names):.0f}")
    print(
        f"every object has a status:         {shown - started:.2f} s "
        f"(status interval {args.status_interval:g} s)"
    )
    print(f"every status Ready=True:           {ready - started:.2f} s")
    writes = {
        k: v
        for k, v in sorted(requests.items())
        if not k.startswith(("list", "watch", "fetch", "create schedules"))
    }
    shown = ", ".join(f"{what} {n / count:.2f}" for what, n in writes.items())
    print(f"operator requests per Schedule:    {shown}")
    print(f"operator CPU for the burst:        {cpu:.1f} s (user + system)")
    print(f"operator log lines for the burst:  {logged} (--log-level {args.log_level})")
    print(
        f"operator RSS:                      {rss_idle / mib:.0f} MiB before the burst, "
        f"{rss_end / mib:.0f} MiB after, peak {rss_peak / mib:.0f} MiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=1000)
    parser.add_argument("--namespaces", type=int, default=1, help="spread over this many")
    parser.add_argument("--concurrency", type=int, default=50, help="create requests in flight")
    parser.add_argument("--status-interval", type=float, default=10.0)
    parser.add_argument(
        "--standalone", action="store_true", help="no kopf peering (default: the chart's peering)"
    )
    parser.add_argument(
        "--log-level", default="info", help="the operator's (its default: what users run)"
    )
    servers.add_arguments(parser)
    args = parser.parse_args()
    with servers.database_server(args.database_url) as url:
        migrate.apply(url)
        add_fleet(url, namespaces(args.namespaces))
        asyncio.run(bench(url, args))


if __name__ == "__main__":
    main()
