"""Connection cuts for longer: the soak of tests/db/test_connection_faults.py.

    python bench/faults.py                                  # 3,000 jobs, cuts for 15 s
    python bench/faults.py --jobs 10000 --cut-seconds 120 --workers 4
    python bench/faults.py --database-url postgresql://postgres@127.0.0.1:5432/postgres

``--workers`` ``tickwork worker`` processes (default settings: 30 s leases, 10 s heartbeat)
serve tests/db/fault_app.py through a TCP proxy that resets every connection every
``--cut-min``..``--cut-max`` seconds for ``--cut-seconds``, while ``--jobs`` jobs of
``--work-seconds`` drain and two every-second schedules fire. Then the cuts stop. Prints: jobs
run, bodies run more than once, attempts beyond the first, duplicate occurrences, jobs
started before the cuts stopped and still running 5 s after, the time until none of those is
left running (recovery) and until every job succeeded (the drain), and worker processes that
exited. The default cuts stop mid-drain (3,000 jobs of 0.2 s on 30 slots take 20 s).

Uses a private PostgreSQL with its default durability unless ``--database-url`` names a
server (see servers.py).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import psycopg
import servers

sys.path.insert(0, str(Path(__file__).parent.parent))
from psycopg.conninfo import conninfo_to_dict, make_conninfo

import tickwork
from tests.db.fault_app import TICK, WORK
from tests.db.fault_helpers import CutProxy, Fleet, runs
from tickwork.db import migrate
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.options import JobTemplate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    servers.add_arguments(parser)
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--work-seconds", type=float, default=0.2)
    parser.add_argument("--cut-seconds", type=float, default=15.0)
    parser.add_argument("--cut-min", type=float, default=1.0)
    parser.add_argument("--cut-max", type=float, default=3.0)
    parser.add_argument("--recovery-timeout", type=float, default=120.0)
    args = parser.parse_args()
    with servers.database_server(args.database_url) as url, tempfile.TemporaryDirectory() as tmp:
        migrate.apply(url)
        run(url, Path(tmp), args)


def run(url: str, tmp: Path, args: argparse.Namespace) -> None:
    app = tickwork.App(url)
    try:
        app.sync_schedules(
            "faults",
            [
                ScheduleDefinition(name=n, every=timedelta(seconds=1), job=JobTemplate(kind=TICK))
                for n in ("tick-a", "tick-b")
            ],
        )
        app.enqueue_many(WORK, [{"seconds": args.work_seconds}] * args.jobs)
    finally:
        app.close()
    params = conninfo_to_dict(url)
    proxy = CutProxy(str(params.get("host") or "127.0.0.1"), int(params.get("port") or 5432))
    (tmp / "runs").mkdir()
    fleet = Fleet(tmp / "runs", tmp)
    proxied = make_conninfo(url, host="127.0.0.1", port=str(proxy.port))
    cut = 0
    try:
        for i in range(args.workers):
            fleet.start(f"w{i + 1}", proxied, namespaces="faults", concurrency=args.concurrency)
        end = time.monotonic() + args.cut_seconds
        while time.monotonic() < end:
            time.sleep(random.uniform(args.cut_min, args.cut_max))
            cut += proxy.cut()
        over = time.monotonic()
        with psycopg.connect(url, autocommit=True) as conn:
            stuck = recovered = drained = None
            while time.monotonic() - over < args.recovery_timeout:
                left, running = _left(conn, over)
                if stuck is None and time.monotonic() - over >= 5.0:
                    stuck = running
                if recovered is None and running == 0:
                    recovered = time.monotonic() - over
                if drained is None and left == 0:
                    drained = time.monotonic() - over
                if None not in (stuck, recovered, drained):
                    break
                time.sleep(0.2)
            _report(conn, fleet, args, (proxy.cuts, cut), stuck, recovered, drained)
    finally:
        fleet.stop()
        proxy.close()


def _seconds(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _left(conn: psycopg.Connection, over: float) -> tuple[int, int]:
    """Work jobs not succeeded yet; jobs running since before the cuts stopped."""
    row = conn.execute(
        "SELECT count(*) FILTER (WHERE kind = %s AND status <> 'succeeded'),"
        " count(*) FILTER (WHERE status = 'running'"
        "                  AND started_at < now() - make_interval(secs => %s))"
        " FROM tickwork.jobs",
        (WORK, time.monotonic() - over),
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def _report(
    conn: psycopg.Connection,
    fleet: Fleet,
    args: argparse.Namespace,
    cuts: tuple[int, int],
    stuck: int | None,
    recovered: float | None,
    drained: float | None,
) -> None:
    def scalar(query: str, *params: object) -> int:
        row = conn.execute(query, params).fetchone()
        return int(row[0]) if row else 0

    ran = runs(fleet.runs)
    succeeded = scalar(
        "SELECT count(*) FROM tickwork.jobs WHERE kind = %s AND status = 'succeeded'", WORK
    )
    figures = {
        "jobs": args.jobs,
        "jobs succeeded": succeeded,
        "bodies run more than once": sum(1 for n in ran.values() if n > 1),
        "attempts beyond the first": scalar(
            "SELECT coalesce(sum(attempt - 1), 0) FROM tickwork.jobs WHERE attempt > 1"
        ),
        "schedule jobs (every-second, two schedules)": scalar(
            "SELECT count(*) FROM tickwork.jobs WHERE kind = %s", TICK
        ),
        "duplicate occurrences": scalar(
            "SELECT count(*) FROM (SELECT 1 FROM tickwork.jobs WHERE schedule_name IS NOT NULL"
            " GROUP BY schedule_name, occurrence_at HAVING count(*) > 1) d"
        ),
        "cuts / connections cut": f"{cuts[0]} / {cuts[1]}",
        "jobs running 5 s after the cuts (started before)": stuck,
        "seconds to recover (none of those left running)": _seconds(recovered),
        "seconds to drain after the cuts": _seconds(drained),
        "worker processes exited": len(fleet.exited()),
        "lease recoveries logged": len(fleet.lines("action=lease_recovered")),
    }
    width = max(map(len, figures))
    for name, value in figures.items():
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    main()
