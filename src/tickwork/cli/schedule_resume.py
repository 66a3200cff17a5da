"""``tickwork schedules resume NAMESPACE NAME``: resume a schedule that
``spec.suspendAfterFailures`` suspended, counting its dead occurrences from zero
(:mod:`tickwork.schedules.resuming`; docs/deadlines.md). Registered under ``schedules`` by
:mod:`tickwork.cli.schedules`."""

from __future__ import annotations

import argparse

from tickwork.cli import common, output


def add_to(actions: common.Subcommands) -> None:
    """Add ``resume`` to the actions of ``tickwork schedules`` (not a command of its own: no
    ``register``, which would make it one)."""
    parser = actions.add_parser(
        "resume",
        help="resume a schedule suspended after consecutive dead occurrences",
        description="Resume a schedule that spec.suspendAfterFailures suspended: it fires "
        "again (the occurrences missed while it was suspended are decided by its misfire "
        "policy) and its count of consecutive dead occurrences starts from zero. Refused "
        "(exit 1) for an unknown or disabled schedule, or one whose own spec.suspend is true "
        "(change the manifest). Audited; run again with the same --request-id, it changes "
        "nothing.",
    )
    parser.add_argument("schedule_namespace", metavar="NAMESPACE")
    parser.add_argument("schedule_name", metavar="NAME")
    common.add_audit(parser)
    parser.add_argument("--request-id", metavar="ID", help="ties the audit record to a request")
    common.add_database_url(parser)
    common.add_output(parser)
    parser.set_defaults(handler=resume)


def resume(args: argparse.Namespace, env: common.Env) -> int:
    for flag, value in (("NAMESPACE", args.schedule_namespace), ("NAME", args.schedule_name)):
        if not value.strip() or "\x00" in value:
            raise common.UsageError(f"{flag}: must be a schedule's {flag.lower()}, not {value!r}")
    with common.app(args, env) as app:
        outcome = app.resume_schedule(
            args.schedule_namespace,
            args.schedule_name,
            actor=common.actor(args, env),
            reason=args.reason,
            request_id=args.request_id,
        )
    if args.output == "json":
        print(
            output.dumps(
                {
                    "namespace": args.schedule_namespace,
                    "name": args.schedule_name,
                    "changed": outcome.changed,
                    "message": outcome.message,
                    "audit_id": outcome.audit_id,
                }
            )
        )
    else:
        print(outcome.message)
    return 0
