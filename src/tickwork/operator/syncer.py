"""The per-namespace sync queue: changes wake it, bursts coalesce, each namespace whose desired
state changed gets one ``sync`` (with pruning) per round.

Handlers only :meth:`Syncer.notify`; a round waits until no change came for
``coalesce_seconds`` (but no longer than ``coalesce_max_seconds``), then groups the whole
index (:func:`desired.group`) and syncs every namespace whose desired state differs from what
it last synced, so 1,000 Schedules created at once cost a few syncs, not 1,000. A failed
sync is retried with a doubling delay (0.5 s up to ``retry_max_seconds``), or at once when
that namespace's desired state changes again; nothing is lost meanwhile because the next
attempt syncs the whole namespace.

Nothing is synced until ``barrier`` returns (the index holds every Schedule that exists, see
:mod:`tickwork.operator.listing`). The first round then also syncs the namespaces this operator
owns in PostgreSQL within its scope (:meth:`Database.owned_namespaces`) that no Schedule names
any more, which prunes Schedules deleted while the operator was down, and nothing another
scope's operator synced.

After its syncs, a round makes the pauses TenantPolicies order (``spec.paused``,
:func:`tenancy.held`): each schedule namespace this operator syncs that a paused policy governs
is paused, audited as ``operator:<cluster>/tenantpolicy/<name>``; a pause of that actor whose
policy no longer orders it is resumed; a pause anyone else made is never touched. Only when
what the policies order (or the namespaces it applies to) changed since the last success, so
a round that changes nothing there costs no query and writes no audit record.

The flow rules TenantPolicies order (``spec.maxRunning``, ``spec.weight``,
:func:`tenancy.limited`) are made the same way, each in its own transaction: the rule of each
schedule namespace this operator syncs that such a policy governs is set, with ``set_by`` the
same actor; a rule of that actor no policy orders any more is removed; a rule anyone else set
is never changed nor removed.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from tickwork import metrics
from tickwork.clock import sleep
from tickwork.errors import InvalidInput, NamespaceOwned
from tickwork.flow import limits
from tickwork.logs import fields
from tickwork.model import Actor
from tickwork.operator.database import Database, DatabaseError
from tickwork.operator.desired import Desired, DesiredState, Entry, group
from tickwork.schedules import tenancy
from tickwork.schedules.tenancy import TenantPolicy
from tickwork.transitions import Outcome as Change

log = logging.getLogger(__name__)

FIRST_RETRY_SECONDS = 0.5
EMPTY = Desired()


class Outcome(enum.StrEnum):
    """How the last sync of a namespace went (the values are Ready condition reasons)."""

    SYNCED = "Synced"
    OWNED_ELSEWHERE = "NamespaceOwnedElsewhere"
    INVALID = "InvalidSpec"
    DATABASE_UNAVAILABLE = "DatabaseUnavailable"


_RESULTS = {
    Outcome.SYNCED: "success",
    Outcome.OWNED_ELSEWHERE: "owned_elsewhere",
    Outcome.INVALID: "invalid",
    Outcome.DATABASE_UNAVAILABLE: "database_error",
}


class _Applied:
    """What the last successful application of some TenantPolicy orders wrote, and the retry
    of a failed one."""

    def __init__(self, what: str, failed: str) -> None:
        self.what = what
        """For the log: ``pausing``, ``limiting``."""
        self.failed = failed
        """The log's action when it fails."""
        self.order: Any = None
        """The order (and the namespaces it applies to) last applied; None: none yet."""
        self.failures = 0
        self.retry_at = 0.0


@dataclass(frozen=True)
class NamespaceState:
    outcome: Outcome
    message: str
    attempted: Desired
    """The desired state the last sync tried to write."""
    synced: Desired | None
    """The desired state last written successfully (None: not yet, by this process)."""


class Syncer:
    def __init__(
        self,
        database: Database,
        entries: Callable[[], Iterable[Entry]],
        *,
        owner: str,
        coalesce_seconds: float,
        coalesce_max_seconds: float,
        retry_max_seconds: float,
        on_round: Callable[[], None],
        policies: Callable[[], Iterable[TenantPolicy]] = tuple,
    ) -> None:
        self.database = database
        self.entries = entries
        self.owner = owner
        self.coalesce_seconds = coalesce_seconds
        self.coalesce_max_seconds = coalesce_max_seconds
        self.retry_max_seconds = retry_max_seconds
        self.on_round = on_round
        self.policies = policies
        self.ready = asyncio.Event()
        self.desired = DesiredState()
        self.transactions = 0
        """Sync calls made (each one transaction), for the benchmark and the logs."""
        self._wake = asyncio.Event()
        self._round_done = asyncio.Condition()
        self._states: dict[str, NamespaceState] = {}
        self._known: set[str] = set()
        self._retry_at: dict[str, float] = {}
        self._failures: dict[str, int] = {}
        self._held = _Applied("pausing", "pause_failed")
        """What the last successful :meth:`_hold` applied: (namespaces, pauses ordered)."""
        self._limited = _Applied("limiting", "limit_failed")
        """What the last successful :meth:`_limit` applied: (namespaces, rules ordered)."""

    @property
    def pause_prefix(self) -> str:
        """How the actor of every pause a TenantPolicy ordered starts."""
        return tenancy.pause_actor(self.owner, "")

    def notify(self) -> None:
        """Something changed: sync what differs, soon."""
        self._wake.set()

    def state(self, namespace: str) -> NamespaceState | None:
        return self._states.get(namespace)

    async def run(self, barrier: Callable[[], Awaitable[None]]) -> None:
        await barrier()
        self._known.update(await self._owned_namespaces())
        self.ready.set()
        log.info("the view is complete: syncing with pruning", extra=fields(action="ready"))
        loop = asyncio.get_running_loop()
        while True:
            next_retry = await self._round()
            timeout = None if next_retry is None else max(0.0, next_retry - loop.time())
            await sleep(timeout, self._wake)
            await self._quiet()

    async def _quiet(self) -> None:
        """Wait until changes stop coming for a moment (a burst becomes one round)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.coalesce_max_seconds
        while True:
            self._wake.clear()
            await asyncio.sleep(self.coalesce_seconds)
            if not self._wake.is_set() or loop.time() >= deadline:
                self._wake.clear()
                return

    async def settle(self, namespace: str, name: str, timeout: float) -> NamespaceState | None:
        """Wait for a sync of ``namespace`` without ``name`` (its object is being deleted).

        Returns the state of that attempt, or None when there is nothing of ours to disable
        (the namespace was never synced). Raises TimeoutError.
        """
        self.notify()
        async with asyncio.timeout(timeout), self._round_done:
            while True:
                if self.ready.is_set():
                    state = self._states.get(namespace)
                    if state is None and namespace not in self._known:
                        return None
                    if state is not None and not state.attempted.lists(name):
                        return state
                await self._round_done.wait()

    async def _owned_namespaces(self) -> list[str]:
        delay = FIRST_RETRY_SECONDS
        while True:
            try:
                return await self.database.owned_namespaces(self.owner)
            except DatabaseError as error:
                metrics.OPERATOR_ERRORS.labels("database").inc()
                log.warning("database unavailable: %s", error, extra=fields(action="retry"))
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.retry_max_seconds)

    async def _round(self) -> float | None:
        """Sync what differs; returns when the earliest pending retry is due (loop time)."""
        loop = asyncio.get_running_loop()
        self.desired = group(self.entries(), self.policies(), self.desired.sources)
        next_retry: float | None = None
        for namespace in sorted(self.desired.namespaces.keys() | self._known):
            wanted = self.desired.namespaces.get(namespace, EMPTY)
            state = self._states.get(namespace)
            if state is not None and state.outcome is Outcome.SYNCED and state.synced == wanted:
                continue
            retry_at = self._retry_at.get(namespace, 0.0)
            if state is not None and state.attempted == wanted and retry_at > loop.time():
                next_retry = retry_at if next_retry is None else min(next_retry, retry_at)
                continue
            state = await self._sync(namespace, wanted, state)
            self._known.add(namespace)
            if state.outcome is not Outcome.SYNCED:
                retry_at = self._retry_at[namespace]
                next_retry = retry_at if next_retry is None else min(next_retry, retry_at)
        for apply in (self._hold, self._limit):
            retry = await apply()
            if retry is not None:
                next_retry = retry if next_retry is None else min(next_retry, retry)
        async with self._round_done:
            self._round_done.notify_all()
        self.on_round()
        return next_retry

    def _candidates(self) -> frozenset[str]:
        """The schedule namespaces the policies' pauses and rules apply to: those this
        operator syncs (not one another owns)."""
        return frozenset(
            namespace
            for namespace in self._known
            if (state := self._states.get(namespace)) is None or state.outcome is Outcome.SYNCED
        )

    async def _hold(self) -> float | None:
        """Pause and resume what TenantPolicies order; returns when to try again (loop time)
        after a failure, else None."""
        candidates = self._candidates()
        wanted = {
            namespace: Actor(
                tenancy.pause_actor(self.owner, policy.name),
                policy.paused_reason or f"TenantPolicy {policy.name!r} has spec.paused: true",
            )
            for namespace, policy in tenancy.held(self.policies(), candidates).items()
        }
        return await self._apply(
            self._held,
            (candidates, wanted),
            lambda: self.database.hold(wanted, sorted(candidates), self.pause_prefix),
        )

    async def _limit(self) -> float | None:
        """Set and remove the flow rules TenantPolicies order (``spec.maxRunning``,
        ``spec.weight``); returns when to try again (loop time) after a failure, else None."""
        candidates = self._candidates()
        wanted: dict[str, tuple[limits.Rule, Actor]] = {}
        for namespace, limit in tenancy.limited(self.policies(), candidates).items():
            try:
                rule = limits.Rule(
                    limits.Scope.NAMESPACE,
                    namespace,
                    max_running=limit.max_running,
                    weight=limit.weight,
                )
            except InvalidInput as error:  # a name longer than a rule's: never crash a round
                log.warning(
                    "schedule namespace %s: no flow rule, though %s: %s",
                    namespace,
                    limit.reason(),
                    error,
                    extra=fields(action="limit_failed", namespace=namespace),
                )
                continue
            actor = tenancy.pause_actor(self.owner, limit.policies[0])
            wanted[namespace] = (rule, Actor(actor, limit.reason()))
        return await self._apply(
            self._limited,
            (candidates, wanted),
            lambda: self.database.limit(wanted, sorted(candidates), self.pause_prefix),
        )

    async def _apply(
        self, applied: _Applied, order: Any, call: Callable[[], Awaitable[list[Change]]]
    ) -> float | None:
        """Run ``call`` unless ``order`` is what was applied last (or its retry is not due);
        returns when to try again (loop time) after a failure, else None."""
        loop = asyncio.get_running_loop()
        if applied.order == order:
            return None
        if applied.failures and applied.retry_at > loop.time():
            return applied.retry_at
        try:
            changes = await call()
        except DatabaseError as error:
            metrics.OPERATOR_ERRORS.labels("database").inc()
            applied.failures += 1
            delay = min(FIRST_RETRY_SECONDS * 2 ** (applied.failures - 1), self.retry_max_seconds)
            applied.retry_at = loop.time() + delay
            log.warning(
                "%s for TenantPolicies failed (retry in %gs): %s",
                applied.what,
                delay,
                error,
                extra=fields(action=applied.failed),
            )
            return applied.retry_at
        applied.failures = 0
        applied.order = order
        for change in changes:
            log.info("%s", change.message, extra=fields(action=change.action))
        return None

    async def _sync(
        self, namespace: str, wanted: Desired, previous: NamespaceState | None
    ) -> NamespaceState:
        synced = previous.synced if previous is not None else None
        started = time.perf_counter()
        self.transactions += 1
        try:
            report = await self.database.sync(
                namespace, wanted.definitions, protect=wanted.protected, owner=self.owner
            )
        except NamespaceOwned as error:
            state = NamespaceState(Outcome.OWNED_ELSEWHERE, str(error), wanted, synced)
        except InvalidInput as error:
            state = NamespaceState(Outcome.INVALID, str(error), wanted, synced)
        except DatabaseError as error:
            metrics.OPERATOR_ERRORS.labels("database").inc()
            message = (
                f"database unavailable: {' '.join(str(error).split()) or type(error).__name__}"
            )
            state = NamespaceState(Outcome.DATABASE_UNAVAILABLE, message, wanted, synced)
        else:
            state = NamespaceState(Outcome.SYNCED, "", wanted, wanted)
            log.info(
                "synced namespace %s: %d created, %d updated, %d disabled",
                namespace,
                len(report.created),
                len(report.updated),
                len(report.disabled),
                extra=fields(action="sync", count=len(wanted.definitions)),
            )
        metrics.OPERATOR_SYNC_DURATION.observe(time.perf_counter() - started)
        metrics.OPERATOR_SYNCS.labels(namespace, _RESULTS[state.outcome]).inc()
        self._states[namespace] = state
        if state.outcome is Outcome.SYNCED:
            self._failures.pop(namespace, None)
            self._retry_at.pop(namespace, None)
        else:
            failures = self._failures.get(namespace, 0) + 1
            self._failures[namespace] = failures
            delay = min(FIRST_RETRY_SECONDS * 2 ** (failures - 1), self.retry_max_seconds)
            self._retry_at[namespace] = asyncio.get_running_loop().time() + delay
            log.warning(
                "sync of namespace %s failed (retry in %gs): %s",
                namespace,
                delay,
                state.message,
                extra=fields(action="sync_failed"),
            )
        return state
