"""Schedules from the command line: ``sync``, ``schedules``, ``preview``, ``backfill``,
``trigger``.

``sync`` reads the same ``Schedule`` manifests as ``kubectl apply`` and makes a schedule
namespace hold exactly them (see :mod:`tickwork.schedules.sync`). Every manifest is loaded and
validated before the database is touched, so an invalid one writes nothing. ``preview`` is
pure: it needs no database.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from tickwork.cli import common, output, schedule_resume
from tickwork.db import job_counts as job_counts_db
from tickwork.db import schedules as schedules_db
from tickwork.db import store
from tickwork.db.job_counts import RunCounts
from tickwork.db.schedules import ScheduleRow
from tickwork.errors import InvalidInput
from tickwork.schedules import calendars, manifests, occurrences, operations, tenancy
from tickwork.schedules.stored import stored_history_limits
from tickwork.schedules.sync import SyncReport
from tickwork.settings import add_arguments
from tickwork.settings.sync import SyncSettings

PREVIEW_COUNT = 10
MAX_PREVIEW_COUNT = 10_000
NAMES_SHOWN = 50
"""Names listed per line of a sync report for people; ``-o json`` lists them all."""

_HASHED_FIELD = re.compile(r"(?:^|[\s,])H(?:[\s,(/]|$)", re.IGNORECASE)


def register(subcommands: common.Subcommands) -> None:
    _register_sync(subcommands)
    _register_schedules(subcommands)
    _register_preview(subcommands)
    _register_backfill(subcommands)
    _register_trigger(subcommands)


def _register_sync(subcommands: common.Subcommands) -> None:
    parser = subcommands.add_parser(
        "sync",
        help="make a schedule namespace hold exactly the Schedules of some manifests",
        description="Load the Schedule manifests of FILE_OR_DIR (a directory is read "
        "recursively: *.yaml, *.yml) and sync them into NAMESPACE: new ones are created, "
        "changed ones updated (their revision bumps), and, unless --no-prune, those no longer "
        "listed are disabled (kept, not deleted). All manifests are validated first: one "
        "invalid manifest fails the command and nothing is written. A namespace remembers "
        "its owner; syncing another owner's namespace is refused unless --take-over. With "
        "--policy, every Schedule must also be allowed by the TenantPolicy documents of that "
        "file that cover --tenant (docs/tenancy.md).",
    )
    parser.add_argument("namespace", metavar="NAMESPACE", help="the schedule namespace")
    parser.add_argument(
        "-f",
        "--filename",
        dest="path",
        required=True,
        metavar="FILE_OR_DIR",
        help="a manifest file, or a directory of them",
    )
    parser.add_argument(
        "--no-prune",
        dest="prune",
        action="store_false",
        help="leave schedules that are not in the manifests alone (default: disable them)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="report what would change; write nothing"
    )
    add_arguments(parser, SyncSettings)
    parser.add_argument(
        "--take-over",
        action="store_true",
        help="make OWNER the owner of a namespace another owner synced",
    )
    parser.add_argument(
        "--policy",
        metavar="FILE",
        help="TenantPolicy documents (YAML) the Schedules must satisfy, as the operator applies "
        "them",
    )
    parser.add_argument(
        "--tenant",
        metavar="NS",
        help="the Kubernetes namespace whose policies apply (default: NAMESPACE); syncing "
        "into NAMESPACE must be allowed to it",
    )
    common.add_database_url(parser)
    common.add_output(parser)
    parser.set_defaults(handler=sync)


def _register_schedules(subcommands: common.Subcommands) -> None:
    parser = subcommands.add_parser(
        "schedules",
        help="list schedules",
        description="List schedules, enabled or not, by namespace and name, with their "
        "counted runs: every job that ended (RUNS), those that succeeded, and those that "
        "failed (dead or cancelled), counted when they ended, so history limits and "
        "retention, which delete jobs, do not lower them (kept --stats-retention-seconds, "
        "90 days by default).",
    )
    parser.add_argument("--namespace", metavar="NS", help="only this schedule namespace")
    common.add_database_url(parser)
    common.add_output(parser)
    parser.set_defaults(handler=list_schedules)
    actions = parser.add_subparsers(dest="schedules_action", metavar="ACTION", required=False)
    schedule_resume.add_to(actions)


def _register_preview(subcommands: common.Subcommands) -> None:
    parser = subcommands.add_parser(
        "preview",
        help="show the next occurrences of a cron expression or interval",
        description="Print the next occurrences of EXPR after --from, in --timezone, as a "
        "schedule with that expression would fire them (daylight saving included; with "
        "--exclude, --start-time and --end-time, its calendar too). EXPR is a "
        "cron expression (5 fields, or 6 with seconds first), a macro (@daily, @hourly, ...) "
        "or '@every DURATION' for an interval (e.g. '@every 90s'). Needs no database.",
    )
    parser.add_argument("expression", metavar="EXPR")
    parser.add_argument(
        "--timezone", default="UTC", metavar="TZ", help="IANA time zone (default %(default)s)"
    )
    parser.add_argument(
        "--from", dest="start", metavar="ISO", help="occurrences after this time (default: now)"
    )
    parser.add_argument(
        "--count",
        type=int,
        default=PREVIEW_COUNT,
        metavar="N",
        help=f"how many (default {PREVIEW_COUNT})",
    )
    parser.add_argument(
        "--seed",
        metavar="NS/NAME",
        help="the schedule whose hashed H fields to show (H offsets derive from its "
        "namespace and name)",
    )
    parser.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="DATE_OR_CRON",
        help="leave out occurrences as spec.exclude does, in --timezone: an ISO date "
        "(2026-12-25, the whole day) or a cron expression naming the minutes to leave out "
        "('* * * * 0,6': weekends); repeat for several",
    )
    parser.add_argument(
        "--start-time", metavar="ISO", help="spec.startTime: no occurrence before this instant"
    )
    parser.add_argument(
        "--end-time", metavar="ISO", help="spec.endTime: no occurrence after this instant"
    )
    common.add_output(parser)
    parser.set_defaults(handler=preview)


def _register_backfill(subcommands: common.Subcommands) -> None:
    parser = subcommands.add_parser(
        "backfill",
        help="create the missing jobs of a schedule's past occurrences",
        description="Create a job for every occurrence of the schedule from --from to --to "
        "(both included) that has none yet; running it again creates nothing twice. The "
        "misfire policy does not apply; the overlap policy does: the jobs of a Forbid, "
        "BufferOne or Replace schedule run one at a time, oldest first, those "
        f"of an Allow schedule side by side. At most {operations.MAX_BACKFILL:,} occurrences in "
        "one call: split a longer range. Audited.",
    )
    _add_schedule_key(parser)
    parser.add_argument("--from", dest="start", required=True, metavar="ISO")
    parser.add_argument("--to", dest="end", required=True, metavar="ISO")
    _add_audit(parser)
    common.add_database_url(parser)
    common.add_output(parser)
    parser.set_defaults(handler=backfill)


def _register_trigger(subcommands: common.Subcommands) -> None:
    parser = subcommands.add_parser(
        "trigger",
        help="run a schedule's job once, now",
        description="Create one job of the schedule now, outside its timetable, and print "
        "its id. Works while the schedule is suspended; refused when it is disabled. Audited. "
        "Run again with the same --request-id, it prints the job it created then and creates "
        "none.",
    )
    _add_schedule_key(parser)
    _add_audit(
        parser,
        "ties the audit record to a request; a request id this schedule has seen "
        "creates no second job",
    )
    common.add_database_url(parser)
    common.add_output(parser)
    parser.set_defaults(handler=trigger)


def _add_schedule_key(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("namespace", metavar="NAMESPACE")
    parser.add_argument("name", metavar="NAME")


def _add_audit(
    parser: argparse.ArgumentParser,
    request_help: str = "ties the audit record to a request or ticket",
) -> None:
    common.add_audit(parser)
    parser.add_argument("--request-id", metavar="ID", help=request_help)


@contextmanager
def _flags(names: Mapping[str, str]) -> Iterator[None]:
    """Report an API's invalid ``field`` as the command-line argument that gave it."""
    try:
        yield
    except InvalidInput as exc:
        if exc.where is not None or exc.field not in names:
            raise
        raise common.UsageError(f"{names[exc.field]}: {exc.reason}") from None


# --- sync ----------------------------------------------------------------------------------


def sync(args: argparse.Namespace, env: common.Env) -> int:
    owner = common.load(SyncSettings, args, env).owner
    definitions = manifests.load_path(args.path, namespace=args.namespace)
    if args.policy is not None:
        tenancy.enforce(args.tenant or args.namespace, args.namespace, definitions, args.policy)
    elif args.tenant is not None:
        raise common.UsageError("--tenant: only with --policy")
    with (
        _flags({"namespace": "NAMESPACE", "owner": "--owner"}),
        common.app(args, env) as app,
    ):
        report = app.sync_schedules(
            args.namespace,
            definitions,
            prune=args.prune,
            owner=owner,
            take_over=args.take_over,
            dry_run=args.dry_run,
        )
    if args.output == "json":
        print(
            output.dumps(
                {
                    "namespace": args.namespace,
                    "owner": owner,
                    "dry_run": args.dry_run,
                    "prune": args.prune,
                    **dataclasses.asdict(report),
                }
            )
        )
    else:
        print(describe_sync(args.namespace, report, dry_run=args.dry_run))
    return 0


def describe_sync(namespace: str, report: SyncReport, *, dry_run: bool) -> str:
    """``namespace billing: 1 created, 0 updated, 2 unchanged, 0 disabled`` and a line of
    names per kind of change, then the pending jobs the disabled schedules lost."""
    changes = {
        "created": report.created,
        "updated": report.updated,
        "unchanged": report.unchanged,
        "disabled": report.disabled,
    }
    counts = ", ".join(f"{len(names)} {change}" for change, names in changes.items())
    dry = " (dry run: nothing written)" if dry_run else ""
    lines = [f"namespace {namespace}: {counts}{dry}"]
    for change, names in changes.items():
        if names:
            lines.append(f"  {change + ':':<10} {_names_shown(names)}")
    if report.cancelled:
        total = sum(report.cancelled.values())
        lines.append(
            f"  {'cancelled:':<10} {total} pending job{'s' if total != 1 else ''} of "
            f"{_names_shown(list(report.cancelled))}"
        )
    return "\n".join(lines)


def _names_shown(names: list[str]) -> str:
    shown = ", ".join(names[:NAMES_SHOWN])
    more = f" and {len(names) - NAMES_SHOWN} more" if len(names) > NAMES_SHOWN else ""
    return shown + more


# --- schedules -----------------------------------------------------------------------------

SCHEDULE_HEADERS = (
    "NAMESPACE",
    "NAME",
    "REV",
    "STATE",
    "SCHEDULE",
    "TIME ZONE",
    "NEXT RUN",
    "LAST OCCURRENCE",
    "LAST JOB",
    "RUNS",
    "SUCCEEDED",
    "FAILED",
    "SKIPPED",
    "OWNER",
    "FIRING ERROR",
)


def list_schedules(args: argparse.Namespace, env: common.Env) -> int:
    with common.app(args, env) as app, app.connection() as conn:
        rows = store.run(conn, schedules_db.list_schedules(args.namespace))
        counts = store.run(conn, job_counts_db.of_schedules((r.namespace, r.name) for r in rows))
    if args.output == "json":
        print(output.dumps([schedule_object(row, counts[row.namespace, row.name]) for row in rows]))
    elif rows:
        table = [_schedule_row(row, counts[row.namespace, row.name]) for row in rows]
        print(output.table(SCHEDULE_HEADERS, table))
    else:
        print("no schedules found")
    return 0


def schedule_object(row: ScheduleRow, runs: RunCounts) -> Mapping[str, Any]:
    """A schedule as the ``-o json`` contract describes it, with its counted ``runs``; the
    history limits are those retention applies (CronJob's defaults for a spec stored before
    they existed)."""
    history = stored_history_limits(row.spec)
    return {
        "namespace": row.namespace,
        "name": row.name,
        "revision": row.revision,
        "enabled": row.enabled,
        "suspend": row.suspend,
        "schedule": row.schedule,
        "every": row.every,
        "time_zone": row.time_zone,
        "next_run_at": output.iso(row.next_run_at),
        "last_occurrence_at": output.iso(row.last_occurrence_at),
        "last_job_id": row.last_job_id,
        "last_job_status": row.last_job_status.value if row.last_job_status else None,
        "last_success_at": output.iso(row.last_success_at),
        "skipped_occurrences": row.skipped_occurrences,
        "owner": row.owner,
        "spec": row.spec,
        "created_at": output.iso(row.created_at),
        "updated_at": output.iso(row.updated_at),
        "firing_error": row.firing_error,
        "firing_failures": row.firing_failures,
        "firing_retry_at": output.iso(row.firing_retry_at),
        "successful_jobs_history_limit": history.succeeded,
        "failed_jobs_history_limit": history.failed,
        "total_runs": runs.runs,
        "succeeded_runs": runs.succeeded,
        "failed_runs": runs.failed,
        "dead_runs": runs.dead,
        "cancelled_runs": runs.cancelled,
        "failed_attempts": runs.failed_attempts,
        "success_rate": runs.success_rate,
        "mean_run_seconds": runs.mean_seconds,
        "runs_counted_since": output.iso(runs.since),
        "dead_streak": row.dead_streak,
        "dead_streak_job_id": row.dead_streak_job_id,
        "failures_suspended_at": output.iso(row.failures_suspended_at),
        "failures_suspended_job_id": row.failures_suspended_job_id,
        "late": row.late,
        "deadlines_missed": row.deadlines_missed,
        "late_occurrence_at": output.iso(row.late_occurrence_at),
        "late_deadline_at": output.iso(row.late_deadline_at),
        "late_job_id": row.late_job_id,
    }


def _schedule_row(row: ScheduleRow, runs: RunCounts) -> tuple[Any, ...]:
    state = "disabled" if not row.enabled else "suspended" if row.suspend else "active"
    if state == "active" and row.firing_error is not None:
        state = "failing"
    if state == "suspended" and row.failures_suspended_at is not None:
        state = "suspended (failures)"
    if state == "active" and row.late:
        state = "late"
    last_job = None
    if row.last_job_id is not None:
        status = row.last_job_status.value if row.last_job_status else "?"
        last_job = f"{row.last_job_id} {status}"
    return (
        row.namespace,
        row.name,
        row.revision,
        state,
        row.schedule if row.schedule is not None else f"every {row.every}",
        row.time_zone,
        row.next_run_at,
        row.last_occurrence_at,
        last_job,
        runs.runs,
        runs.succeeded,
        runs.failed,
        row.skipped_occurrences,
        row.owner,
        row.firing_error,
    )


# --- preview -------------------------------------------------------------------------------


def preview(args: argparse.Namespace, env: common.Env) -> int:
    if not 1 <= args.count <= MAX_PREVIEW_COUNT:
        raise common.UsageError(f"--count: must be between 1 and {MAX_PREVIEW_COUNT}")
    start = datetime.now(UTC) if args.start is None else common.instant("--from", args.start)
    try:
        occurrences.load_zone(args.timezone)
    except occurrences.InvalidExpression as exc:
        raise common.UsageError(f"--timezone: {exc}") from None
    seed = _seed(args.seed)
    if not seed and _HASHED_FIELD.search(args.expression):
        print(
            "tickwork: warning: H fields are hashed from a schedule's namespace and name; "
            "pass --seed NS/NAME to see that schedule's times",
            file=sys.stderr,
        )
    calendar = _calendar(args, seed)
    try:
        found = calendars.preview(
            args.expression,
            calendar,
            time_zone=args.timezone,
            start=start,
            count=args.count,
            seed=seed,
        )
    except calendars.CalendarError as exc:
        raise common.UsageError(f"--exclude: {exc}") from None
    except occurrences.InvalidExpression as exc:
        raise common.UsageError(f"EXPR: {exc}") from None
    if len(found) < args.count and calendar.end is not None:
        shown = calendar.end.isoformat()
        print(f"tickwork: no occurrence after --end-time {shown}: it ends there", file=sys.stderr)
    if args.output == "json":
        print(output.dumps([instant.isoformat() for instant in found]))
    else:
        print("\n".join(describe_instants(found)))
    return 0


_CALENDAR_FLAGS = {
    "spec.exclude": "--exclude",
    "spec.startTime": "--start-time",
    "spec.endTime": "--end-time",
}


def _calendar(args: argparse.Namespace, seed: str) -> calendars.Calendar:
    """The calendar of --exclude, --start-time and --end-time; errors name the flag."""
    start = None if args.start_time is None else common.instant("--start-time", args.start_time)
    end = None if args.end_time is None else common.instant("--end-time", args.end_time)
    try:
        return calendars.Calendar.parse(args.exclude, start, end, seed=seed)
    except calendars.CalendarError as exc:
        flag = _CALENDAR_FLAGS.get(exc.field.partition("[")[0], exc.field)
        reason = str(exc).replace("spec.startTime", "--start-time")
        raise common.UsageError(f"{flag}: {reason}") from None


def _seed(text: str | None) -> str:
    if text is None:
        return ""
    namespace, _, name = text.partition("/")
    if not namespace or not name:
        raise common.UsageError(f"--seed: expected NAMESPACE/NAME, got {text!r}")
    return text


def describe_instants(instants: Sequence[datetime]) -> list[str]:
    """``2026-03-08T03:00:00-04:00  Sun  EDT``: the instant in its zone, weekday, zone name."""
    return [f"{i.isoformat()}  {i.strftime('%a')}  {i.tzname()}" for i in instants]


# --- backfill and trigger ------------------------------------------------------------------


def backfill(args: argparse.Namespace, env: common.Env) -> int:
    start = common.instant("--from", args.start)
    end = common.instant("--to", args.end)
    with _flags({"start": "--from", "end": "--to", "name": "NAME"}), common.app(args, env) as app:
        report = app.backfill(
            args.namespace,
            args.name,
            start,
            end,
            actor=common.actor(args, env),
            reason=args.reason,
            request_id=args.request_id,
        )
    if args.output == "json":
        print(
            output.dumps(
                {
                    "namespace": args.namespace,
                    "name": args.name,
                    "created": report.created,
                    "existing": report.existing,
                }
            )
        )
    else:
        print(
            f"schedule {args.namespace}/{args.name}: {report.created} jobs created, "
            f"{report.existing} occurrences already had one"
        )
    return 0


def trigger(args: argparse.Namespace, env: common.Env) -> int:
    with common.app(args, env) as app:
        job_id = app.trigger(
            args.namespace,
            args.name,
            actor=common.actor(args, env),
            reason=args.reason,
            request_id=args.request_id,
        )
        if args.output == "json":
            print(output.dumps(output.job_object(app.get_job(job_id))))
        else:
            print(job_id)
    return 0
