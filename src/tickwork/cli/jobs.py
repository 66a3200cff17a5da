"""Jobs from the command line: ``enqueue``, ``jobs``, ``cancel``, ``retry``."""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import timedelta
from typing import Any

from tickwork.app import App
from tickwork.cli import common, job_view, output
from tickwork.cli.worker import load_app
from tickwork.db import clock as clock_db
from tickwork.db import store
from tickwork.db import workers as workers_db
from tickwork.errors import InvalidInput, UnknownTask
from tickwork.flow.limits import check_concurrency_limit
from tickwork.model import DEFAULT_QUEUE, JobStatus
from tickwork.schedules.checks import check_payload
from tickwork.settings import WorkerSettings
from tickwork.tasks import check_job_fields
from tickwork.workflows.after import check_after

LIST_LIMIT = 100
# A worker row not refreshed for this long is no longer counted as running.
LIVE_WORKER_SECONDS = WorkerSettings.worker_ttl_seconds

_FLAGS = {
    "kind": "KIND",
    "queue": "--queue",
    "priority": "--priority",
    "max_attempts": "--max-attempts",
    "unique_key": "--unique-key",
    "concurrency_key": "--concurrency-key",
    "concurrency_limit": "--concurrency-limit",
    "after": "--after",
}


def register(subcommands: common.Subcommands) -> None:
    _register_enqueue(subcommands)
    _register_jobs(subcommands)
    for name, handler, summary in (
        (
            "cancel",
            cancel,
            "cancel an available job, or ask a running one to stop (it stays running, holding "
            "its concurrency key, until its worker has stopped it)",
        ),
        ("retry", retry, "send a dead or cancelled job back to available, attempts reset"),
    ):
        parser = subcommands.add_parser(name, help=summary, description=summary.capitalize() + ".")
        parser.add_argument("job_id", metavar="JOB_ID", type=int)
        common.add_audit(parser)
        common.add_database_url(parser)
        parser.set_defaults(handler=handler)


def _register_enqueue(subcommands: common.Subcommands) -> None:
    parser = subcommands.add_parser(
        "enqueue",
        help="add a job",
        description="Add a job and print its id. A kind that no running worker serves is "
        "refused; with no worker running at all, the job is added with a warning.",
    )
    parser.add_argument("kind", metavar="KIND", help="task name, e.g. report.nightly")
    parser.add_argument(
        "--payload", default="{}", metavar="JSON", help="a JSON object (default: {})"
    )
    parser.add_argument(
        "--queue", help=f"default: the task's queue with --app, else {DEFAULT_QUEUE}"
    )
    parser.add_argument(
        "--app",
        metavar="MODULE:APP",
        help="the App that registers KIND (as for tickwork worker): its task's queue is used",
    )
    parser.add_argument("--run-at", metavar="ISO", help="not before this time (with UTC offset)")
    parser.add_argument("--unique-key", metavar="K", help="return the open job with this key")
    parser.add_argument("--priority", type=int, default=0, help="0..32767, higher first (0)")
    parser.add_argument(
        "--concurrency-key",
        metavar="K",
        help="jobs sharing this key run one at a time fleet-wide (or --concurrency-limit)",
    )
    parser.add_argument(
        "--concurrency-limit",
        type=int,
        metavar="N",
        help="with --concurrency-key: at most N jobs of the key run at once (default 1)",
    )
    parser.add_argument(
        "--max-attempts",
        type=int,
        metavar="N",
        help="default: the task's own, applied by the worker that claims the job",
    )
    parser.add_argument(
        "--after",
        metavar="ID[,ID...]",
        help="run only once these jobs (enqueued from code, like this one) have succeeded; "
        "cancelled if one ends dead or cancelled",
    )
    parser.add_argument(
        "--allow-unknown-kind",
        action="store_true",
        help="enqueue even though no running worker serves KIND",
    )
    common.add_database_url(parser)
    common.add_output(parser)
    parser.set_defaults(handler=enqueue)


def _register_jobs(subcommands: common.Subcommands) -> None:
    parser = subcommands.add_parser(
        "jobs",
        help="list jobs; jobs get JOB_ID: one job, its result and progress",
        description="List jobs, newest first; `tickwork jobs get JOB_ID` shows one job with "
        "its result and progress.",
    )
    parser.add_argument("--status", choices=[s.value for s in JobStatus])
    parser.add_argument("--kind")
    parser.add_argument("--queue")
    parser.add_argument(
        "--limit", type=int, default=LIST_LIMIT, metavar="N", help=f"default {LIST_LIMIT}"
    )
    common.add_database_url(parser)
    common.add_output(parser)
    parser.set_defaults(handler=list_jobs)
    job_view.add_get(parser)


def enqueue(args: argparse.Namespace, env: common.Env) -> int:
    try:
        payload: Any = json.loads(args.payload)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise common.UsageError(f"--payload: not valid JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise common.UsageError(
            f"--payload: must be a JSON object ({{...}}), not {type(payload).__name__}: "
            'tasks read their arguments by name (wrap a list as {"items": [...]})'
        )
    try:
        check_payload(InvalidInput, "--payload", payload)
    except InvalidInput as exc:
        raise common.UsageError(f"{exc.field}: {exc.reason}") from None
    run_at = None if args.run_at is None else common.instant("--run-at", args.run_at)
    queue = args.queue
    if args.app is not None:
        task = load_app(args.app).registry.get(args.kind)
        if task is None:
            raise common.UsageError(f"--app: {args.app} registers no task {args.kind!r}")
        queue = queue or task.queue
    try:
        check_job_fields(
            kind=args.kind,
            queue=queue,
            priority=args.priority,
            max_attempts=args.max_attempts,
            unique_key=args.unique_key,
            concurrency_key=args.concurrency_key,
        )
        if args.concurrency_limit is not None:
            if args.concurrency_key is None:
                raise InvalidInput(
                    "concurrency_limit", "needs --concurrency-key: the key it limits"
                )
            check_concurrency_limit(args.concurrency_limit)
        after = _after(args.after)
    except InvalidInput as exc:
        raise common.UsageError(f"{_flag(exc.field)}: {exc.reason}") from None
    with common.app(args, env) as app:
        if not args.allow_unknown_kind:
            _check_served(app, args.kind, queue or DEFAULT_QUEUE)
        try:
            job_id = app.enqueue(
                args.kind,
                payload,
                queue=queue,
                priority=args.priority,
                run_at=run_at,
                unique_key=args.unique_key,
                max_attempts=args.max_attempts,
                concurrency_key=args.concurrency_key,
                concurrency_limit=args.concurrency_limit,
                after=after,
            )
        except InvalidInput as exc:
            raise common.UsageError(f"{_flag(exc.field)}: {exc.reason}") from None
        if args.output == "json":
            print(output.dumps(output.job_object(app.get_job(job_id))))
        else:
            print(job_id)
    return 0


def _flag(field: str) -> str:
    """The command-line spelling of an App field (``after[2]`` is ``--after``)."""
    return _FLAGS.get(field.split("[")[0], field)


def _after(value: str | None) -> list[int]:
    """``--after 12,15`` as job ids (checked as :meth:`App.enqueue` checks ``after``)."""
    if value is None:
        return []
    ids = []
    for part in value.split(","):
        if not re.fullmatch(r"[0-9]{1,18}", part.strip()):
            raise InvalidInput("after", f"not a job id: {part.strip()!r} (give ID[,ID...])")
        ids.append(int(part))
    return check_after(ids)


def _check_served(app: App, kind: str, queue: str) -> None:
    """Refuse a kind that running workers exist for but none serves; warn when the job will
    wait (no worker at all, or none of those serving the kind claims from its queue)."""
    with app.connection() as conn:
        now = store.run(conn, clock_db.database_now())
        workers = store.run(conn, workers_db.list_workers())
    live = [w for w in workers if now - w.last_seen_at < timedelta(seconds=LIVE_WORKER_SECONDS)]
    if not live:
        _warn(f"no worker is running: the {kind} job waits until one serving it starts")
        return
    serving = [w for w in live if kind in w.kinds]
    if not serving:
        kinds = ", ".join(sorted({k for w in live for k in w.kinds})) or "none"
        raise UnknownTask(
            f"no running worker serves kind {kind!r} (served: {kinds}); "
            "use --allow-unknown-kind to enqueue it anyway"
        )
    if not any(queue in w.queues for w in serving):
        queues = ", ".join(sorted({q for w in serving for q in w.queues}))
        _warn(f"the workers serving {kind} claim from {queues}, not from queue {queue!r}")


def _warn(message: str) -> None:
    print(f"tickwork: warning: {message}", file=sys.stderr)


def list_jobs(args: argparse.Namespace, env: common.Env) -> int:
    if args.limit < 1:
        raise common.UsageError(f"--limit: must be at least 1, got {args.limit}")
    with common.app(args, env) as app:
        jobs = app.list_jobs(status=args.status, kind=args.kind, queue=args.queue, limit=args.limit)
    if args.output == "json":
        print(output.dumps([output.job_object(job) for job in jobs]))
    elif jobs:
        print(output.table(output.JOB_HEADERS, [output.job_row(job) for job in jobs]))
    else:
        print("no jobs found")
    return 0


def cancel(args: argparse.Namespace, env: common.Env) -> int:
    with common.app(args, env) as app:
        status = app.cancel(args.job_id, actor=common.actor(args, env), reason=args.reason)
    if status is JobStatus.RUNNING:
        print(f"job {args.job_id} asked to stop: cancelled once its worker has stopped it")
    else:
        print(f"job {args.job_id} {status.value}")
    return 0


def retry(args: argparse.Namespace, env: common.Env) -> int:
    with common.app(args, env) as app:
        app.retry(args.job_id, actor=common.actor(args, env), reason=args.reason)
    print(f"job {args.job_id} is available again, attempts reset")
    return 0
