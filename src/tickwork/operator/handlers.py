"""kopf registration: every handler is a closure over one :class:`Runtime`, registered in the
:class:`kopf.OperatorRegistry` given (no module-level state).

* ``desired`` (index): each object as :class:`~tickwork.operator.reporter.Shown` (its
  :class:`~tickwork.operator.desired.Entry` and its body), keyed by its schedule namespace.
  kopf runs no other handler before every watched resource's initial listing is indexed.
* ``changed`` (every watch event): wakes the syncer, and answers a run-now token
  (:mod:`tickwork.operator.run_now`: one job per token, awaited by this object's handler
  only, never by the syncer).
* ``policy_changed`` (every TenantPolicy watch event): updates the policies in force
  (:mod:`tickwork.operator.tenants`) and wakes the syncer, whose next round re-evaluates every
  Schedule against them.
* ``deleted`` (finalizer): returns once a sync without the object committed, so its
  definition is disabled before the object goes.
* startup/cleanup: the syncer, the status board and the status loop
  (:mod:`tickwork.operator.reporter`, one for all objects, after each board refresh:
  :meth:`Runtime.report` per object); login: service account, else kubeconfig.

:meth:`Runtime.report` computes one object's status patch, posts a Warning Event when the
Ready condition turns to a failure (InvalidSpec, SyncFailed) or Served turns False (NoWorker,
KindNotRegistered, QueueNotServed), and the rate-limited Events of :mod:`tickwork.operator.events`
(SuccessfulCreate, SawCompletedJob, ...); the status round also tries again a run-now token
that had to wait (not synced yet, database unavailable).

No handler raises for what an object holds: translation reports a bad spec as InvalidSpec
(:mod:`tickwork.operator.translate`), so every object is indexed (the complete-view barrier
ends) and its finalizer can go. kopf itself copies and encodes each body recursively (its diff
base), so the operator allows :data:`RECURSION_LIMIT` frames, enough for the deepest JSON the
Kubernetes API server accepts (10000 levels).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import kopf

from tickwork import metrics
from tickwork.clock import Clock, DatabaseClock, cancel_all
from tickwork.db.schedules import ScheduleRow
from tickwork.logs import fields
from tickwork.model import DEFAULT_QUEUE
from tickwork.operator import deadlines, events, listing, peers, run_now, served, status, tenants
from tickwork.operator.board import Board
from tickwork.operator.config import GROUP, PLURAL, VERSION, OperatorConfig
from tickwork.operator.database import Database
from tickwork.operator.desired import Entry, entry_of
from tickwork.operator.kube import StatusWriter
from tickwork.operator.reporter import Reporter, Shown
from tickwork.operator.syncer import Outcome, Syncer
from tickwork.schedules.stored import stored_kind

log = logging.getLogger(__name__)

SETTLE_SECONDS = 10.0
"""How long a deletion waits for its sync before kopf retries the handler."""
RETRY_DELETION_SECONDS = 2.0
"""A deletion that found the database unavailable asks again this often (cheap: the syncer
decides when to really try)."""
RECURSION_LIMIT = 25_000
"""Python frames the operator process allows: kopf deep-copies a body two frames per level."""


def allow_deep_objects() -> None:
    """Let kopf (and the official client) handle any body the API server accepts: Python's
    default of 1000 frames fails on a payload nested about 500 levels deep."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), RECURSION_LIMIT))


class Runtime:
    """The operator's moving parts for one run: the syncer and the status board."""

    def __init__(
        self, config: OperatorConfig, database: Database, clock: Clock | None = None
    ) -> None:
        allow_deep_objects()
        self.config = config
        self.clock = clock or DatabaseClock()
        """Status timestamps read its :meth:`~tickwork.clock.Clock.wall` time."""
        self.database = database
        self.stalled: str | None = None
        """Why the start has waited too long for the complete view (None: it has not)."""
        self.index: kopf.Index[str, Shown] | None = None
        self.board = Board(database, self._namespaces, config.live_worker_seconds)
        self.events = events.Recorder(config.event_window_seconds)
        self.policies = tenants.Policies()
        self.policies_complete = False
        """Whether :attr:`policies` has held every TenantPolicy (the barrier's first half) since
        this operator last became the active one."""
        self.syncer = self._syncer()
        self.lister = listing.Lister(config.namespaces)
        self.priority = (
            config.peering_priority
            if config.peering_priority is not None
            else peers.derived_priority(time.time())
        )
        """kopf peering priority (see :mod:`tickwork.operator.peers`)."""
        self.activity: peers.Watch | peers.Always | None = None
        self.activations = 0
        """How many times this operator became the active one."""
        self.peering_missing: str | None = None
        """Why the peering object has been missing too long (None: it has not)."""
        self._listed_at: tuple[float, frozenset[listing.ListedKey]] | None = None
        """The listing the last complete view was checked against: when it started
        (monotonic) and its (namespace, name, uid) keys."""
        self._active: list[asyncio.Task[None]] = []
        self.run_now = run_now.RunNow(database, self.ready, self.supplies, self.clock.wall)
        self.reporter = Reporter(self.shown, self._report, StatusWriter(config.status_concurrency))
        self._seen: dict[tuple[str, str], tuple[Any, ...]] = {}
        self._tasks: list[asyncio.Task[None]] = []

    def _syncer(self) -> Syncer:
        return Syncer(
            self.database,
            self.entries,
            owner=self.config.owner,
            coalesce_seconds=self.config.coalesce_seconds,
            coalesce_max_seconds=self.config.coalesce_max_seconds,
            retry_max_seconds=self.config.retry_max_seconds,
            on_round=self.board.wake,
            policies=self.policies.current,
        )

    def _indexed(self) -> Iterator[Shown]:
        """Everything kopf's index holds, stale entries too."""
        if self.index is None:
            return
        for namespace in self.index:
            yield from self.index[namespace]

    def shown(self) -> Iterator[Shown]:
        """The objects of the operator's view: the index without the entries indexed before
        the last complete-view listing that it no longer held. Those objects were deleted
        while kopf's watch was paused (a standby) or broken, and kopf keeps an entry until
        its watch reports the deletion, which a watch that lists again never does."""
        listed = self._listed_at
        for shown in self._indexed():
            if listed is not None and shown.indexed_at < listed[0]:
                key = (shown.entry.key[0], shown.entry.key[1], shown.entry.uid)
                if key not in listed[1]:
                    continue
            yield shown

    def entries(self) -> Iterator[Entry]:
        for shown in self.shown():
            yield shown.entry

    def observe(self, event_type: str | None, body: kopf.Body) -> None:
        """Wake the syncer when what the sync depends on changed (not on status patches)."""
        key = (body.metadata.namespace or "", body.metadata.name or "")
        if event_type == "DELETED":
            self._seen.pop(key, None)
            self.run_now.forget(key)
            self.events.forget(key)
            self.reporter.forget(key)
            self.syncer.notify()
            return
        # The translation, not the raw spec: it is what a sync reads, and comparing it never
        # recurses over a hostile payload (a valid one nests at most 64 levels).
        seen = (body.metadata.uid, body.metadata.deletion_timestamp, entry_of(body).translation)
        if self._seen.get(key) != seen:
            self._seen[key] = seen
            self.syncer.notify()

    def observe_policy(self, event_type: str | None, body: kopf.Body) -> None:
        if self.policies.observe(event_type, body):
            self.syncer.notify()

    def supplies(self, entry: Entry) -> bool:
        """Whether the definition stored for ``entry``'s schedule is this object's (not that
        of another object with the same name, which it lost to or was refused beside)."""
        key = (entry.translation.namespace, entry.translation.name)
        return self.syncer.desired.sources.get(key, entry.key) == entry.key

    def _namespaces(self) -> set[str]:
        return set(self.syncer.desired.namespaces)

    def alive(self) -> str | None:
        """None while the loops run; otherwise what stopped (for /healthz)."""
        for task in [*self._tasks, *self._active]:
            if task.done():
                return f"{task.get_name()} stopped"
        return None

    def start(self, index: kopf.Index[str, Shown]) -> None:
        """Follow the peering object (:mod:`tickwork.operator.peers`): the syncer and the
        status loops run only while this operator is the active one."""
        self.index = index
        if self.config.standalone:
            self.activity = peers.Always(self._activity)
        else:
            reader = peers.Reader(self.config.peering, self.config.namespaces)
            self.activity = peers.Watch(
                reader.statuses,
                identity=self.config.identity,
                priority=self.priority,
                lifetime=self.config.peering_lifetime,
                interval=self.config.listing_interval,
                where=reader.where(),
                on_change=self._activity,
                on_missing=self._peering_lost,
            )
        self._tasks = [asyncio.create_task(self.activity.run(), name="peering watch")]

    async def _activity(self, active: bool) -> None:
        if active:
            self._activate()
        else:
            await self._deactivate()

    def _activate(self) -> None:
        """Became the active operator: a fresh syncer (as after a start) whose barrier checks
        the view against a new listing first; then the status loops."""
        self.activations += 1
        first = self.activations == 1
        log.info(
            "active: this operator syncs (priority %d)%s",
            self.priority,
            "" if first else ", after a complete view",
            extra=fields(action="active"),
        )
        self.syncer = self._syncer()
        self._active = [
            asyncio.create_task(self.syncer.run(lambda: self._barrier(first)), name="syncer"),
            asyncio.create_task(
                self.board.run(self.config.status_interval, self._refreshed), name="status board"
            ),
            asyncio.create_task(self.reporter.run(), name="status loop"),
        ]

    async def _deactivate(self) -> None:
        await cancel_all(self._active)
        self._active = []
        self.policies_complete = False
        self.stalled = None

    async def _barrier(self, first: bool) -> None:
        """Return once the view is complete. At the first activation kopf's index holds only
        what its watches listed since (a standby's watches never ran), so every listed object
        being indexed is enough. After a pause, the index also holds what it saw before, so an
        object must be indexed at the version listed (an edit made meanwhile has come in), and
        what the listing no longer holds (deleted meanwhile) leaves the view."""

        async def complete(listed: Callable[[], set[Any]], indexed: Callable[[], set[Any]]) -> None:
            await listing.wait_for_complete_view(
                listed,
                indexed,
                interval=self.config.listing_interval,
                on_error=self._listing_failed,
                on_stalled=self._view_stalled,
                peering=None if self.config.standalone else self.config.peering,
            )

        if first:
            await complete(tenants.listed_keys, self.policies.keys)
        else:
            policies = listing.Remembered(tenants.listed_versions)
            await complete(policies, self.policies.versions)
            self.policies.forget_unlisted(policies.last, policies.started)
        self.policies_complete = True
        objects = listing.Remembered(self.lister.versions)
        if first:
            await complete(lambda: {key[:3] for key in objects()}, self._indexed_keys)
        else:
            await complete(objects, self._indexed_versions)
        self._listed_at = (objects.started, frozenset(key[:3] for key in objects.last))

    async def stop(self) -> None:
        await cancel_all([*self._tasks, *self._active])

    def _indexed_keys(self) -> set[listing.ListedKey]:
        return {(s.entry.key[0], s.entry.key[1], s.entry.uid) for s in self._indexed()}

    def _indexed_versions(self) -> set[listing.VersionedKey]:
        return {(s.entry.key[0], s.entry.key[1], s.entry.uid, s.version) for s in self._indexed()}

    def _peering_lost(self, reason: str | None) -> None:
        self.peering_missing = reason

    def _view_stalled(self, reason: str | None) -> None:
        self.stalled = reason

    async def readiness(self) -> str | None:
        """For /readyz: why no sync can happen yet (the complete view has stalled, or the
        peering object is missing), if so. A standby is ready: it serves the webhook and
        takes over when the active operator goes."""
        return self.stalled or self.peering_missing

    def _listing_failed(self, error: Exception) -> None:
        metrics.OPERATOR_ERRORS.labels("watch").inc()
        log.warning("listing failed: %s", error, extra=fields(action="retry"))

    def ready(self, entry: Entry) -> status.Ready:
        return status.ready(
            entry,
            refusal=self.syncer.desired.refused.get(entry.key),
            state=self.syncer.state(entry.translation.namespace),
            database_error=self.board.error,
            row=self.board.rows.get((entry.translation.namespace, entry.translation.name)),
        )

    def _refreshed(self) -> None:
        self._count()
        self.reporter.wake()

    def _count(self) -> None:
        counts = dict.fromkeys(("True", "False", "Unknown"), 0)
        for entry in self.entries():
            if not entry.deleting:
                counts[self.ready(entry).status] += 1
        for value, count in counts.items():
            metrics.OPERATOR_SCHEDULES.labels(value).set(count)

    def served(self, entry: Entry, row: ScheduleRow | None) -> status.Ready:
        """The Served condition: for the kind and queue stored (what fires), else the spec's."""
        stored = stored_kind(row.spec) if row is not None else None
        job = (row.spec.get("job") or {}) if row is not None else {}
        definition = entry.translation.definition
        kind = stored or (definition.job.kind if definition is not None else None)
        queue = job.get("queue") or (definition.job.queue if definition is not None else None)
        return served.served(
            self.board.fleet,
            entry.translation.namespace,
            kind,
            queue or DEFAULT_QUEUE,
            database_error=self.board.error,
        )

    async def _report(self, shown: Shown, current: dict[str, Any]) -> dict[str, Any]:
        """One object's status round: a run-now token that waited, then the status."""
        changes = await self.run_now.handle(shown.body, current)
        changes.update(self.report(shown, current))
        return changes

    def _new(self, entry: Entry, now: datetime) -> bool:
        """Whether the object was created within the last status interval."""
        if entry.created is None:
            return False
        try:
            created = datetime.fromisoformat(entry.created)
        except ValueError:
            return False
        if created.tzinfo is None:
            created = created.replace(tzinfo=UTC)
        return (now - created).total_seconds() < self.config.status_interval

    def report(self, shown: Shown, current: dict[str, Any]) -> dict[str, Any]:
        """The status patch for one object, posting Events on transitions."""
        body, entry = shown.body, shown.entry
        condition = self.ready(entry)
        now = self.clock.wall()
        if not current and condition.reason == run_now.PENDING and self._new(entry, now):
            return {}  # its first sync is on its way: its first status shows the outcome
        key = (entry.translation.namespace, entry.translation.name)
        # A refused object never shows another's row or job ids.
        refused = entry.key in self.syncer.desired.refused
        row = None if refused else self.board.rows.get(key)
        last = None if refused else self.board.last_jobs.get(key)
        active = () if refused else self.board.active.get(key, ())
        found = status.facts(row, active, last, now) | deadlines.facts(row)
        service = self.served(entry, row)
        guards = deadlines.conditions(row)
        changes = status.patch(current, entry, condition, found, now, served=service, extra=guards)
        for guard in deadlines.events(current, guards):
            kopf.event(body, type="Warning", reason=guard.reason, message=guard.message)
        before = status.previous(current)
        if condition.failed and (before is None or before.message != condition.message):
            reason = condition.reason if condition.reason in status.EVENT_REASONS else "SyncFailed"
            kopf.event(body, type="Warning", reason=reason, message=condition.message)
        was = status.previous(current, "Served")
        if service.failed and (
            was is None or (was.status, was.reason) != ("False", service.reason)
        ):
            kopf.event(body, type="Warning", reason=service.reason, message=service.message)
        seen = None if row is None or self.board.error else status.seen(row, last)
        for event in self.events.observe(entry.key, entry.uid, seen, now):
            kopf.event(body, type=event.type, reason=event.reason, message=event.message)
        return changes


def register(registry: kopf.OperatorRegistry, runtime: Runtime) -> None:
    resource = (GROUP, VERSION, PLURAL)

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)

    @kopf.index(*resource, id="desired", registry=registry)
    async def desired(body: kopf.Body, **_: Any) -> dict[str, Shown]:
        runtime.reporter.capture()  # kopf's context of object handlers, to post Events
        shown = Shown.of(body, time.monotonic())
        return {shown.entry.translation.namespace: shown}

    @kopf.on.startup(registry=registry)
    async def start(**kwargs: Any) -> None:
        runtime.start(kwargs["desired"])  # the index, passed by its id

    @kopf.on.cleanup(registry=registry)
    async def stop(**_: Any) -> None:
        await runtime.stop()

    @kopf.on.event(*resource, registry=registry)
    async def changed(
        event: kopf.RawEvent, body: kopf.Body, status: kopf.Status, patch: kopf.Patch, **_: Any
    ) -> None:
        runtime.observe(event.get("type"), body)
        if event.get("type") != "DELETED":
            patch.status.update(await runtime.run_now.handle(body, status))

    @kopf.on.event(GROUP, VERSION, tenants.PLURAL, registry=registry)
    async def policy_changed(event: kopf.RawEvent, body: kopf.Body, **_: Any) -> None:
        runtime.observe_policy(event.get("type"), body)

    @kopf.on.delete(*resource, registry=registry)
    async def deleted(body: kopf.Body, **_: Any) -> None:
        entry = entry_of(body)
        translation = entry.translation
        if not runtime.supplies(entry):
            return  # the stored definition is another object's: nothing of ours to disable
        try:
            state = await runtime.syncer.settle(
                translation.namespace, translation.name, SETTLE_SECONDS
            )
        except TimeoutError:
            raise kopf.TemporaryError("waiting for the sync that disables it", delay=1) from None
        if state is None or state.outcome is Outcome.SYNCED:
            return
        if state.outcome is Outcome.DATABASE_UNAVAILABLE:
            raise kopf.TemporaryError(state.message, delay=RETRY_DELETION_SECONDS)
        message = f"deleted without disabling its definition: {state.message}"
        kopf.event(body, type="Warning", reason="SyncFailed", message=message)
