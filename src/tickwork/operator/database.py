"""The operator's database calls, each run in a worker thread on a small pool of its own.

A pool (rather than the App's) so that an unreachable database fails a call within
``timeout`` seconds instead of blocking the operator; connections broken by a cut or a restart
of the database are found before use (the pool checks each one) and replaced. Nothing here
keeps session state, so the operator works through a transaction-mode pooler as it is.

The database knows the operator's ``scope`` (the Kubernetes namespaces it watches, empty: all):
a sync records it on the schedule namespace, and refuses a namespace another operator of the
same owner synced from a disjoint scope; the namespaces pruned at start are those of the scope.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from tickwork.db import budget, connections, operators, store
from tickwork.db import jobs as jobs_db
from tickwork.db import namespaces as namespaces_db
from tickwork.db import pauses as pauses_db
from tickwork.db import schedules as db
from tickwork.db import workers as workers_db
from tickwork.errors import InvalidInput, NamespaceOwned
from tickwork.flow import limiting, limits, pausing
from tickwork.flow.pauses import Scope
from tickwork.model import Actor
from tickwork.schedules import operations, sync
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.transitions import Outcome

T = TypeVar("T")

POOL_SIZE = budget.OPERATOR_POOL

DatabaseError = connections.DatabaseError
"""What a call raises when the database is unreachable or refuses."""


class Database:
    def __init__(self, url: str, *, timeout: float = 5.0, scope: operators.Scope = ()) -> None:
        self.url = url
        self.timeout = timeout
        self.scope = scope
        self._pool: connections.Pool | None = None

    def _connection_pool(self) -> connections.Pool:
        if self._pool is None:
            self._pool = connections.pool(self.url, max_size=POOL_SIZE, check=True)
            self._pool.open(wait=False)
        return self._pool

    def _run(self, op: store.Op[T]) -> T:
        with self._connection_pool().connection(timeout=self.timeout) as conn:
            return store.run(conn, op)

    async def sync(
        self,
        namespace: str,
        definitions: Sequence[ScheduleDefinition],
        *,
        protect: frozenset[str],
        owner: str,
    ) -> sync.SyncReport:
        """One desired-state sync of ``namespace`` with pruning, and the scope it came from
        (one transaction). Raises NamespaceOwned when another owner owns it, or when the same
        owner's operator of a disjoint scope synced it last (and has not synced it empty)."""
        synced_scope = self.scope if definitions or protect else None

        def call() -> sync.SyncReport:
            with (
                self._connection_pool().connection(timeout=self.timeout) as conn,
                conn.transaction(),
            ):
                found = store.run(conn, namespaces_db.lock_scope(namespace))
                if (
                    found is not None
                    and found.owner == owner
                    and found.scope is not None
                    and not operators.overlaps(found.scope, self.scope)
                ):
                    raise NamespaceOwned(
                        f"schedule namespace {namespace!r} is synced from the Kubernetes "
                        f"namespaces {', '.join(found.scope)} by another operator of {owner!r}"
                    )
                report = sync.sync(
                    conn,
                    namespace,
                    definitions,
                    prune=True,
                    owner=owner,
                    take_over=False,
                    dry_run=False,
                    now=None,
                    protect=protect,
                )
                store.run(conn, namespaces_db.record_scope(namespace, owner, synced_scope))
                return report

        return await asyncio.to_thread(call)

    async def owned_namespaces(self, owner: str) -> list[str]:
        """The namespaces ``owner`` owns that this operator's scope synced (all of them when
        it watches every namespace): those its first sync after a start prunes."""
        return await asyncio.to_thread(
            self._run, namespaces_db.namespaces_in_scope(owner, self.scope)
        )

    async def join(
        self, registration: operators.Registration, ttl_seconds: float
    ) -> list[operators.Member]:
        """Register in the operators' registry unless a live operator of the same owner
        watches a namespace of this scope; returns those (empty: registered)."""

        def call() -> list[operators.Member]:
            owner = registration.owner
            with (
                self._connection_pool().connection(timeout=self.timeout) as conn,
                conn.transaction(),
            ):
                store.run(conn, operators.lock_owner(owner))
                store.run(conn, operators.clear(owner, registration.identity))
                others = store.run(
                    conn,
                    operators.overlapping(owner, registration.scope, registration.peering),
                )
                if not others:
                    store.run(conn, operators.insert(registration, ttl_seconds))
                return others

        return await asyncio.to_thread(call)

    async def heartbeat(self, registration: operators.Registration, ttl_seconds: float) -> str:
        """Extend the registry entry: ``renewed``, ``replaced`` or ``gone``."""
        return await asyncio.to_thread(self._run, operators.heartbeat(registration, ttl_seconds))

    async def leave(self, registration: operators.Registration) -> None:
        await asyncio.to_thread(self._run, operators.leave(registration))

    async def trigger(
        self, namespace: str, name: str, actor: Actor, details: Mapping[str, Any]
    ) -> Outcome:
        """:func:`operations.trigger` in one transaction: one job of the schedule now, or
        the earlier one of ``actor``'s request id (raises ScheduleNotFound, InvalidTransition
        for a disabled schedule)."""

        def call() -> Outcome:
            with (
                self._connection_pool().connection(timeout=self.timeout) as conn,
                conn.transaction(),
            ):
                return operations.trigger(conn, namespace, name, actor, None, details=details)

        return await asyncio.to_thread(call)

    async def schedules(self) -> list[db.ScheduleRow]:
        return await asyncio.to_thread(self._run, db.list_schedules(None))

    async def open_jobs(self, namespaces: Sequence[str], shown: int) -> list[jobs_db.OpenJob]:
        """At most ``shown`` per schedule, each with its schedule's exact count."""
        return await asyncio.to_thread(self._run, jobs_db.open_job_list(namespaces, shown))

    async def last_jobs(self, namespaces: Sequence[str]) -> list[jobs_db.LastJob]:
        return await asyncio.to_thread(self._run, jobs_db.last_job_list(namespaces))

    async def live_workers(self, ttl_seconds: float) -> list[workers_db.LiveWorker]:
        """The workers seen within ``ttl_seconds`` (on the database clock)."""
        return await asyncio.to_thread(self._run, workers_db.live_workers(ttl_seconds, None))

    async def pauses(self) -> list[pauses_db.PauseRow]:
        """The paused queues and schedule namespaces (for the Served condition)."""
        return await asyncio.to_thread(self._run, pauses_db.list_pauses())

    async def hold(
        self, wanted: Mapping[str, Actor], candidates: Sequence[str], prefix: str
    ) -> list[Outcome]:
        """Make the pauses of schedule namespaces that TenantPolicies order (one transaction,
        through :mod:`tickwork.flow.pausing`, so audited): pause each namespace of ``wanted``
        that is not paused, as its actor; resume each of ``candidates`` not in ``wanted`` whose
        pause an actor starting with ``prefix`` made (the operator's own, for a policy), and no
        other. Returns the changes (a namespace not synced yet is left for the next call)."""

        def call() -> list[Outcome]:
            changes: list[Outcome] = []
            with (
                self._connection_pool().connection(timeout=self.timeout) as conn,
                conn.transaction(),
            ):
                rows = store.run(conn, pauses_db.list_pauses(Scope.NAMESPACE.value))
                paused = {row.name: row for row in rows}
                for name, actor in sorted(wanted.items()):
                    if name in paused:
                        continue  # paused already, by a policy or by a person: nothing to do
                    try:
                        changes.append(pausing.pause(conn, Scope.NAMESPACE, name, actor, None))
                    except InvalidInput:
                        continue  # not in the database (yet): nothing fires there
                for row in rows:
                    if (
                        row.name in candidates
                        and row.name not in wanted
                        and row.paused_by.startswith(prefix)
                    ):
                        policy = row.paused_by.removeprefix(prefix)
                        reason = f"TenantPolicy {policy!r} no longer pauses it"
                        actor = Actor(row.paused_by, reason)
                        changes.append(pausing.resume(conn, Scope.NAMESPACE, row.name, actor, None))
            return [change for change in changes if change.changed]

        return await asyncio.to_thread(call)

    async def limit(
        self,
        wanted: Mapping[str, tuple[limits.Rule, Actor]],
        candidates: Sequence[str],
        prefix: str,
    ) -> list[Outcome]:
        """Make the flow rules of schedule namespaces that TenantPolicies order (one
        transaction, through :mod:`tickwork.flow.limiting`, so audited): set each rule of
        ``wanted`` whose namespace has no rule or one an actor starting with ``prefix`` set
        (the operator's own, for a policy), as its actor; remove the rule of each of
        ``candidates`` not in ``wanted`` that such an actor set. A rule anyone else set is
        never changed nor removed. Returns the changes."""

        def call() -> list[Outcome]:
            changes: list[Outcome] = []
            with (
                self._connection_pool().connection(timeout=self.timeout) as conn,
                conn.transaction(),
            ):
                rows = limiting.list_rules(conn, limits.Scope.NAMESPACE, None)
                current = {row.rule.name: row for row in rows}
                for name, (rule, actor) in sorted(wanted.items()):
                    row = current.get(name)
                    if row is not None and not row.set_by.startswith(prefix):
                        continue  # a person's rule: theirs to change
                    changes.append(limiting.set_rule(conn, rule, actor, None))
                for row in rows:
                    name = row.rule.name
                    if name in candidates and name not in wanted and row.set_by.startswith(prefix):
                        policy = row.set_by.removeprefix(prefix)
                        reason = f"TenantPolicy {policy!r} no longer limits it"
                        actor = Actor(row.set_by, reason)
                        changes.append(
                            limiting.remove_rule(conn, limits.Scope.NAMESPACE, name, actor, None)
                        )
            return [change for change in changes if change.changed]

        return await asyncio.to_thread(call)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
