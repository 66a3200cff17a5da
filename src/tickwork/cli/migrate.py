"""``tickwork migrate [--status]``: apply the shipped migrations, or list them."""

from __future__ import annotations

import argparse

from tickwork.cli import common, output
from tickwork.db import migrate


def register(subcommands: common.Subcommands) -> None:
    parser = subcommands.add_parser(
        "migrate",
        help="apply pending database migrations",
        description="Apply pending migrations (safe to run from many processes at once).",
    )
    parser.add_argument(
        "--status", action="store_true", help="list applied and pending migrations; change nothing"
    )
    common.add_database_url(parser)
    common.add_output(parser)
    common.add_logging(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, env: common.Env) -> int:
    url = common.database_url(args, env)
    common.configure_logging(args, env)
    if args.status:
        _print_status(migrate.status(url), args.output)
        return 0
    applied = migrate.apply(url)
    if args.output == "json":
        print(output.dumps([{"version": m.version, "name": m.name} for m in applied]))
    elif applied:
        for migration in applied:
            print(f"applied {migration.name}")
    else:
        print("up to date: no migration pending")
    return 0


def _print_status(statuses: list[migrate.MigrationStatus], fmt: str) -> None:
    if fmt == "json":
        rows = [
            {"version": s.migration.version, "name": s.migration.name, "applied": s.applied}
            for s in statuses
        ]
        print(output.dumps(rows))
        return
    print(
        output.table(
            ("VERSION", "NAME", "STATUS"),
            [
                (s.migration.version, s.migration.name, "applied" if s.applied else "pending")
                for s in statuses
            ],
        )
    )
