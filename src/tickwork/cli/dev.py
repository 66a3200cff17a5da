"""``tickwork dev [--data-dir DIR] [--port N] [--db-only]``: see :mod:`tickwork.devmode`."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from tickwork import devmode
from tickwork.cli import common
from tickwork.cli.worker import exit_abandoning_threads, serve
from tickwork.settings import QuietLogSettings, add_arguments
from tickwork.settings.dev import DevSettings


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
    add_arguments(parser, DevSettings)
    common.add_logging(parser, QuietLogSettings)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, env: common.Env) -> int:
    settings = common.load(DevSettings, args, env)
    common.configure_logging(args, env)
    out = sys.stdout
    with devmode.database(Path(settings.data_dir), settings.port, out) as server:
        if settings.db_only:
            devmode.serve_database(server, out)
            print("stopping PostgreSQL", file=out, flush=True)
            return 0
        worker, view = devmode.start(server, out)
        asyncio.run(serve(worker, view.run(), before_forced_exit=server.stop))
        print("worker stopped; stopping PostgreSQL", file=out, flush=True)
    print("PostgreSQL stopped", file=out, flush=True)
    return exit_abandoning_threads(1 if worker.failed else 0)
