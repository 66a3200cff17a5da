"""``tickwork workers``: the registered worker processes, each ``live`` or ``stale`` (its last
heartbeat is older than two of its heartbeat intervals: stopped, killed or cut off; its jobs'
leases are running out and its row expires after ``--worker-ttl-seconds``)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from tickwork.cli import common, output
from tickwork.db import store
from tickwork.db import workers as workers_db

HEADERS = ("NAME", "STATE", "HOST", "PID", "QUEUES", "NAMESPACES", "CONCURRENCY", "LAST SEEN")


def register(subcommands: common.Subcommands) -> None:
    parser = subcommands.add_parser(
        "workers",
        help="list the registered workers",
        description="List the registered worker processes by name: live, or stale when "
        "their last heartbeat is older than two of their heartbeat intervals.",
    )
    common.add_database_url(parser)
    common.add_output(parser)
    parser.set_defaults(handler=list_workers)


def state(worker: workers_db.WorkerInfo) -> str:
    return "stale" if worker.stale else "live"


def worker_object(worker: workers_db.WorkerInfo) -> Mapping[str, Any]:
    """A worker as ``-o json`` prints it."""
    return {
        "name": worker.name,
        "incarnation": str(worker.incarnation),
        "state": state(worker),
        "host": worker.host,
        "pid": worker.pid,
        "queues": worker.queues,
        "kinds": worker.kinds,
        "namespaces": worker.namespaces,
        "concurrency": worker.concurrency,
        "heartbeat_seconds": worker.heartbeat_seconds,
        "started_at": output.iso(worker.started_at),
        "last_seen_at": output.iso(worker.last_seen_at),
    }


def list_workers(args: argparse.Namespace, env: common.Env) -> int:
    with common.app(args, env) as app, app.connection() as conn:
        workers = store.run(conn, workers_db.list_workers())
    if args.output == "json":
        print(output.dumps([worker_object(w) for w in workers]))
    elif workers:
        rows = [
            (
                w.name,
                state(w),
                w.host,
                w.pid,
                ",".join(w.queues),
                ",".join(w.namespaces) or None,
                w.concurrency,
                w.last_seen_at,
            )
            for w in workers
        ]
        print(output.table(HEADERS, rows))
    else:
        print("no workers registered")
    return 0
