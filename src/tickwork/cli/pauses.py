"""``tickwork queues`` and ``tickwork namespaces``: list them with their paused state and
their limits, and pause or resume one (fleet-wide, persisted, audited; see
:mod:`tickwork.flow`); their ``limit`` and ``unlimit`` are :mod:`tickwork.cli.limits`'."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from typing import Any

from tickwork.app import App
from tickwork.cli import common, limits, output
from tickwork.db import pauses as pauses_db
from tickwork.db import store
from tickwork.flow import limiting
from tickwork.flow.limits import Scope as RuleScope
from tickwork.transitions import Outcome

QUEUE_HEADERS = (
    "QUEUE", "STATE", "AVAILABLE", "RUNNING", "PAUSED BY", "PAUSED AT", "REASON", "LIMIT"
)  # fmt: skip
NAMESPACE_HEADERS = (
    "NAMESPACE", "STATE", "SCHEDULES", "PAUSED BY", "PAUSED AT", "REASON", "LIMIT"
)  # fmt: skip


def register(subcommands: common.Subcommands) -> None:
    _register(
        subcommands,
        "queues",
        "queue",
        "its waiting jobs are claimed by no worker of the fleet; running jobs finish",
        list_queues,
    )
    _register(
        subcommands,
        "namespaces",
        "namespace",
        "its schedules fire nothing, as if suspended; on resume the misfire policy decides "
        "about the occurrences missed meanwhile",
        list_namespaces,
    )


def _register(
    subcommands: common.Subcommands,
    command: str,
    what: str,
    effect: str,
    lister: Callable[[argparse.Namespace, common.Env], int],
) -> None:
    parser = subcommands.add_parser(
        command,
        help=f"list {command} with their paused state and limits; pause, resume, limit or "
        "unlimit one",
        description=f"List the {command} with their paused state and limits (no subcommand), "
        f"or pause, resume, limit or unlimit one. A paused {what}: {effect}.",
    )
    common.add_database_url(parser)
    common.add_output(parser)
    parser.set_defaults(handler=lister)
    actions = parser.add_subparsers(metavar="ACTION")
    for action in ("pause", "resume"):
        sub = actions.add_parser(action, help=f"{action} a {what} (audited)")
        sub.add_argument("name", metavar=what.upper())
        common.add_audit(sub)
        common.add_database_url(sub)
        sub.set_defaults(handler=_acting(command, action))
    limits.add_actions(actions, command, what)


_ACTIONS: dict[tuple[str, str], Callable[..., Outcome]] = {
    ("queues", "pause"): App.pause_queue,
    ("queues", "resume"): App.resume_queue,
    ("namespaces", "pause"): App.pause_namespace,
    ("namespaces", "resume"): App.resume_namespace,
}


def _acting(command: str, action: str) -> Callable[[argparse.Namespace, common.Env], int]:
    def act(args: argparse.Namespace, env: common.Env) -> int:
        with common.app(args, env) as app:
            outcome = _ACTIONS[command, action](
                app, args.name, actor=common.actor(args, env), reason=args.reason
            )
        print(outcome.message)
        return 0

    return act


def _pause_object(pause: pauses_db.PauseRow | None) -> Mapping[str, Any] | None:
    if pause is None:
        return None
    return {
        "paused_by": pause.paused_by,
        "paused_at": output.iso(pause.paused_at),
        "reason": pause.reason,
    }


def _pause_cells(pause: pauses_db.PauseRow | None) -> tuple[Any, ...]:
    if pause is None:
        return ("active", None, None, None)
    return ("paused", pause.paused_by, pause.paused_at, pause.reason)


def list_queues(args: argparse.Namespace, env: common.Env) -> int:
    with common.app(args, env) as app, app.connection() as conn:
        queues = store.run(conn, pauses_db.list_queues())
        rules = limits.by_name(limiting.list_rules(conn, RuleScope.QUEUE, None))
    known = {q.name for q in queues}
    queues += [pauses_db.QueueState(name, 0, 0, None) for name in rules if name not in known]
    queues.sort(key=lambda q: q.name)
    if args.output == "json":
        objects = [
            {
                "name": q.name,
                "paused": q.pause is not None,
                "available": q.available,
                "running": q.running,
                "pause": _pause_object(q.pause),
                "limit": limits.limit_object(rules.get(q.name)),
            }
            for q in queues
        ]
        print(output.dumps(objects))
    elif queues:
        rows = []
        for q in queues:
            state, *paused = _pause_cells(q.pause)
            limit = limits.limit_cell(rules.get(q.name))
            rows.append((q.name, state, q.available, q.running, *paused, limit))
        print(output.table(QUEUE_HEADERS, rows))
    else:
        print("no queues with jobs, none paused or limited")
    return 0


def list_namespaces(args: argparse.Namespace, env: common.Env) -> int:
    with common.app(args, env) as app, app.connection() as conn:
        namespaces = store.run(conn, pauses_db.list_namespaces())
        rules = limits.by_name(limiting.list_rules(conn, RuleScope.NAMESPACE, None))
    known = {n.name for n in namespaces}
    namespaces += [pauses_db.NamespaceState(name, 0, None) for name in rules if name not in known]
    namespaces.sort(key=lambda n: n.name)
    if args.output == "json":
        objects = [
            {
                "name": n.name,
                "paused": n.pause is not None,
                "schedules": n.schedules,
                "pause": _pause_object(n.pause),
                "limit": limits.limit_object(rules.get(n.name)),
            }
            for n in namespaces
        ]
        print(output.dumps(objects))
    elif namespaces:
        rows = []
        for n in namespaces:
            state, *paused = _pause_cells(n.pause)
            limit = limits.limit_cell(rules.get(n.name))
            rows.append((n.name, state, n.schedules, *paused, limit))
        print(output.table(NAMESPACE_HEADERS, rows))
    else:
        print("no schedule namespaces")
    return 0
