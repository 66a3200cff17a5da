"""Flow rules on the command line (see :mod:`tickwork.flow.limits`):
``tickwork queues|kinds|namespaces limit NAME [--max-running N] [--rate N/PERIOD]
[--rate-key FIELD] [--weight W]`` and ``... unlimit NAME`` (audited, as pause and resume),
``tickwork kinds`` (the kinds' rules) and ``tickwork limits`` (every rule, with its group's
running jobs and its rate's recent starts). ``queues`` and ``namespaces`` show their groups'
rules in their own listings (:mod:`tickwork.cli.pauses`)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Mapping
from typing import Any

from tickwork.cli import common, output
from tickwork.errors import InvalidInput
from tickwork.flow import limiting, limits

LIMIT_HEADERS = ("SCOPE", "NAME", "LIMIT", "RUNNING", "RECENT STARTS", "SET BY", "SET AT")
_WHOLE = re.compile(r"[+-]?[0-9]{1,18}")

SCOPES = {"queues": limits.Scope.QUEUE, "kinds": limits.Scope.KIND}
SCOPES["namespaces"] = limits.Scope.NAMESPACE


def register(subcommands: common.Subcommands) -> None:
    kinds = subcommands.add_parser(
        "kinds",
        help="list the kinds' limits; limit or unlimit a kind",
        description="List the limits of kinds (no subcommand), or set or remove a kind's "
        "limit: at most so many of its jobs running at once, fleet-wide, and at most so many "
        "starts per period.",
    )
    common.add_database_url(kinds)
    common.add_output(kinds)
    kinds.set_defaults(handler=_lister(limits.Scope.KIND))
    add_actions(kinds.add_subparsers(metavar="ACTION"), "kinds", "kind")

    every = subcommands.add_parser(
        "limits",
        help="list every limit with its running jobs and recent starts",
        description="List the limits of queues, kinds and schedule namespaces, each with its "
        "group's running jobs (fleet-wide) and its rate's starts in the last period.",
    )
    common.add_database_url(every)
    common.add_output(every)
    every.set_defaults(handler=_lister(None))


def add_actions(actions: Any, command: str, what: str) -> None:
    """``limit`` and ``unlimit`` under ``command`` (queues, kinds, namespaces)."""
    scope = SCOPES[command]
    sub = actions.add_parser(
        "limit",
        help=f"set a {what}'s limit, replacing the one it had (audited)",
        description=f"Set the {what}'s limit, fleet-wide, replacing the one it had (give every "
        "option to keep). The claim starts a job only when every limit on its queue, its kind "
        "and its schedule namespace has room.",
    )
    sub.add_argument("name", metavar=what.upper())
    sub.add_argument(
        "--max-running", metavar="N", help="at most N of its jobs running at once (1-100,000)"
    )
    sub.add_argument(
        "--rate",
        metavar="N/PERIOD",
        help="at most N starts per period, a sliding window: 100/min, 10/s, 50/10s, 1000/hour",
    )
    sub.add_argument(
        "--rate-key",
        metavar="FIELD",
        help="apply the rate per value of this payload field (e.g. customer)",
    )
    if scope is limits.Scope.NAMESPACE:
        sub.add_argument(
            "--weight", metavar="W", help="its share in fair claiming, against 1 (1-1000)"
        )
    common.add_audit(sub)
    common.add_database_url(sub)
    sub.set_defaults(handler=_limit(scope))

    sub = actions.add_parser("unlimit", help=f"remove a {what}'s limit (audited)")
    sub.add_argument("name", metavar=what.upper())
    common.add_audit(sub)
    common.add_database_url(sub)
    sub.set_defaults(handler=_unlimit(scope))


def whole(text: str | None, field: str, most: int) -> int | None:
    """A whole number given on the command line; anything else is refused naming ``field``
    (the range by :func:`tickwork.flow.limits.check_count`)."""
    if text is None:
        return None
    if not _WHOLE.fullmatch(text.strip()):
        raise InvalidInput(field, f"must be a whole number from 1 to {most:,}, got {text!r}")
    return limits.check_count(int(text), field, most)


def rule_of(scope: limits.Scope, args: argparse.Namespace) -> limits.Rule:
    """The rule the options give (checked: a wrong value names its field)."""
    rate = None if args.rate is None else limits.Rate.parse(args.rate)
    weight = whole(getattr(args, "weight", None), "weight", limits.MAX_WEIGHT)
    return limits.Rule(
        scope,
        args.name,
        whole(args.max_running, "max_running", limits.MAX_RUNNING),
        rate,
        args.rate_key,
        weight,
    )


def _limit(scope: limits.Scope) -> Callable[[argparse.Namespace, common.Env], int]:
    def act(args: argparse.Namespace, env: common.Env) -> int:
        rule = rule_of(scope, args)  # checked before connecting
        with common.app(args, env) as app:
            outcome = app.set_limit(
                scope.value,
                rule.name,
                max_running=rule.max_running,
                rate=rule.rate,
                rate_key=rule.rate_key,
                weight=rule.weight,
                actor=common.actor(args, env),
                reason=args.reason,
            )
        print(outcome.message)
        return 0

    return act


def _unlimit(scope: limits.Scope) -> Callable[[argparse.Namespace, common.Env], int]:
    def act(args: argparse.Namespace, env: common.Env) -> int:
        limits.check_name(scope, args.name)
        with common.app(args, env) as app:
            outcome = app.remove_limit(
                scope.value, args.name, actor=common.actor(args, env), reason=args.reason
            )
        print(outcome.message)
        return 0

    return act


def limit_object(row: limiting.StoredRule | None) -> Mapping[str, Any] | None:
    """A rule in ``-o json``: its settings, in words, and its group's use of it."""
    if row is None:
        return None
    rule = row.rule
    return {
        "description": rule.describe(),
        "max_running": rule.max_running,
        "rate": str(rule.rate) if rule.rate else None,
        "rate_starts": rule.rate.starts if rule.rate else None,
        "rate_period_seconds": rule.rate.period_seconds if rule.rate else None,
        "rate_key": rule.rate_key,
        "weight": rule.weight,
        "running": row.running,
        "recent_starts": row.recent_starts,
        "set_by": row.set_by,
        "set_at": output.iso(row.set_at),
    }


def limit_cell(row: limiting.StoredRule | None) -> str | None:
    return row.rule.describe() if row else None


def by_name(rows: list[limiting.StoredRule]) -> dict[str, limiting.StoredRule]:
    return {row.rule.name: row for row in rows}


def _lister(scope: limits.Scope | None) -> Callable[[argparse.Namespace, common.Env], int]:
    def list_limits(args: argparse.Namespace, env: common.Env) -> int:
        with common.app(args, env) as app:
            rows = app.list_limits(scope.value if scope else None)
        if args.output == "json":
            objects = [
                {"scope": row.rule.scope.value, "name": row.rule.name, **(limit_object(row) or {})}
                for row in rows
            ]
            print(output.dumps(objects))
        elif rows:
            print(output.table(LIMIT_HEADERS, [_cells(row) for row in rows]))
        else:
            print(f"no {scope.value} limits" if scope else "no limits")
        return 0

    return list_limits


def _cells(row: limiting.StoredRule) -> tuple[Any, ...]:
    rule = row.rule
    running = None
    if rule.max_running is not None:
        running = f"{row.running}/{rule.max_running}"
    recent = None
    if rule.rate is not None:
        per = " (all keys)" if rule.rate_key else ""
        recent = f"{row.recent_starts}/{rule.rate.starts}{per}"
    return (rule.scope.value, rule.name, rule.describe(), running, recent, row.set_by, row.set_at)
