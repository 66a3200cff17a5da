"""The flow rules tasks declare (``@app.task(kind, max_running=3, rate="10/s",
rate_key="customer")``), written by each worker at its start for the kinds it registers.

Each rule is written through :func:`tickwork.flow.limiting.set_rule`, audited with actor
:data:`ACTOR` (``set_by`` of the rule); a rule that is already so records nothing. A kind the
worker registers whose task declares no limit loses the rule :data:`ACTOR` set (an older
version declared one), and keeps any other. A rule anyone else set for a kind (from the command
line, the Python API, the console) is left alone, with a warning: it is theirs to remove, and
the next worker to start then writes the task's.

Workers of different versions declaring different limits for a kind: the last to start wins
(each writes what its code declares). The writes of workers starting together are serialized
by an advisory lock, so the same declaration is recorded once.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime

from tickwork.db import connections, store
from tickwork.db import flow_rules as rules_db
from tickwork.flow import limiting
from tickwork.flow.limits import Rule, Scope
from tickwork.logs import fields
from tickwork.model import Actor
from tickwork.transitions import Outcome

log = logging.getLogger(__name__)

ACTOR = "task"
"""The actor (and ``set_by``) of the rules tasks declare."""


Declared = tuple[str, Rule | None]
"""A registered kind and the rule its task declares (None: none), as
:attr:`tickwork.tasks.Task.rule` gives it."""


def apply(
    conn: connections.Connection, tasks: Iterable[Declared], worker: str, now: datetime | None
) -> list[Outcome]:
    """Write the kind rules ``tasks`` declare, and remove those :data:`ACTOR` set for their
    kinds that they no longer declare (in the caller's transaction); returns the changes."""
    store.run(conn, rules_db.lock_task_rules())
    current = {row.rule.name: row for row in limiting.list_rules(conn, Scope.KIND, None)}
    changes: list[Outcome] = []
    for kind, rule in tasks:
        row = current.get(kind)
        if row is not None and row.set_by != ACTOR:
            if rule is not None and row.rule != rule:
                log.warning(
                    "kind %s keeps the rule %s set by %s, not the task's (%s): remove it "
                    "(app.remove_limit('kind', %r)) and the next worker to start writes the "
                    "task's",
                    kind,
                    row.rule.describe(),
                    row.set_by,
                    rule.describe(),
                    kind,
                    extra=fields(action="task_rule_kept", kind=kind),
                )
            continue
        reason = f"declared by task {kind!r} (worker {worker})"
        if rule is not None:
            changes.append(limiting.set_rule(conn, rule, Actor(ACTOR, reason), now))
        elif row is not None:
            reason = f"task {kind!r} declares no limit (worker {worker})"
            actor = Actor(ACTOR, reason)
            changes.append(limiting.remove_rule(conn, Scope.KIND, kind, actor, now))
    return [change for change in changes if change.changed]


def write(database_url: str, tasks: Iterable[Declared], worker: str) -> list[Outcome]:
    """:func:`apply` on a connection of its own, in one transaction (blocking: a worker runs
    it in a thread at its start), logging each change. A database error is logged, not
    raised: the worker runs on with the rules as they are."""
    try:
        with connections.connect(database_url, timeout=10) as conn:
            changes = apply(conn, tasks, worker, None)
    except connections.DatabaseError as error:
        log.warning(
            "could not write the tasks' flow rules: %s",
            error,
            extra=fields(action="task_rules_failed"),
        )
        return []
    for change in changes:
        log.info("%s", change.message, extra=fields(action=change.action))
    return changes
