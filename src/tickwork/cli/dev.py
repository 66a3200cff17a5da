"""``tickwork dev [--data-dir .tickwork] [--port N] [--db-only]``: see :mod:`tickwork.devmode`."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from tickwork import devmode
from tickwork.cli import common
from tickwork.cli.worker import exit_abandoning_threads, serve


def register(subcommands: common.Subcommands) -> None:
    parser = subcommands.add_parser(
        "dev",
        help="everything on one machine: embedded PostgreSQL, a worker, example schedules",
        description="Start PostgreSQL in --data-dir, migrate it, sync the example Schedule "
        "manifests into namespace 'examples', run a worker serving the example tasks "
        "(tickwork.examples) and firing those schedules, enqueue example jobs and show every "
        "job state change and fired occurrence. Ctrl-C stops the worker gracefully, then "
        "PostgreSQL.",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(".tickwork"),
        metavar="DIR",
        help="where PostgreSQL keeps its data (default .tickwork)",
    )
    parser.add_argument(
        "--port",
        type=int,
        metavar="N",
        help="PostgreSQL port on 127.0.0.1 (default: the last one used, or a free one)",
    )
    parser.add_argument(
        "--db-only",
        action="store_true",
        help="only start PostgreSQL (migrated) and print its URL for TICKWORK_DATABASE_URL; "
        "no worker, no examples; Ctrl-C stops it",
    )
    common.add_logging(parser, "warning")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, env: common.Env) -> int:
    common.configure_logging(args, env)
    out = sys.stdout
    with devmode.database(args.data_dir, args.port, out) as server:
        if args.db_only:
            devmode.serve_database(server, out)
            print("stopping PostgreSQL", file=out, flush=True)
            return 0
        worker, view = devmode.start(server, out)
        asyncio.run(serve(worker, view.run(), before_forced_exit=server.stop))
        print("worker stopped; stopping PostgreSQL", file=out, flush=True)
    print("PostgreSQL stopped", file=out, flush=True)
    return exit_abandoning_threads(1 if worker.failed else 0)
