"""The App's schedule methods: desired-state sync (``app.sync_schedules``), the listing, the
revision-fenced single fire, backfill and the manual trigger. :class:`tickwork.App` inherits
them; the firing loop itself is :mod:`tickwork.maintenance.firing`, run by the worker."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from tickwork import transitions
from tickwork.db import schedules as schedules_db
from tickwork.db import store
from tickwork.db.connections import Connected
from tickwork.errors import ScheduleNotFound
from tickwork.model import Actor, JobId
from tickwork.schedules import operations, resuming
from tickwork.schedules import sync as schedule_sync
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.sync import SyncReport


class ScheduleControls:
    """Schedules synced, listed, fired, backfilled and triggered, for a class with a clock and
    connections (the App)."""

    def sync_schedules(
        self: Connected,
        namespace: str,
        definitions: Sequence[ScheduleDefinition],
        *,
        prune: bool = True,
        owner: str = "tickwork",
        take_over: bool = False,
        dry_run: bool = False,
    ) -> SyncReport:
        """Make ``namespace`` hold exactly ``definitions`` (with ``prune``, the others are
        disabled). All validated first; one transaction; ``dry_run`` reports and writes nothing.
        Another owner's namespace is refused (NamespaceOwned) unless ``take_over``."""
        with self.connection() as conn:
            return schedule_sync.sync(
                conn,
                namespace,
                definitions,
                prune=prune,
                owner=owner,
                take_over=take_over,
                dry_run=dry_run,
                now=self.clock.now(),
            )

    def list_schedules(
        self: Connected, namespace: str | None = None
    ) -> list[schedules_db.ScheduleRow]:
        """Every schedule (of ``namespace``), enabled or not, by namespace and name."""
        with self.connection() as conn:
            return store.run(conn, schedules_db.list_schedules(namespace))

    def get_schedule(self: Connected, namespace: str, name: str) -> schedules_db.ScheduleRow:
        with self.connection() as conn:
            rows = store.run(conn, schedules_db.list_schedules(namespace, name))
        if not rows:
            raise ScheduleNotFound(f"no schedule {name!r} in namespace {namespace!r}")
        return rows[0]

    def fire_schedule(
        self: Connected, namespace: str, name: str, revision: int, occurrence_at: datetime
    ) -> JobId | None:
        """Create the job of one occurrence, only if the schedule is enabled and still at
        ``revision``; None otherwise, or when the occurrence has its job already. Misfire and
        overlap policies do not apply; ``occurrence_at`` must be an occurrence of the schedule."""
        with self.connection() as conn:
            return operations.fire(conn, namespace, name, revision, occurrence_at, self.clock.now())

    def backfill(
        self: Connected,
        namespace: str,
        name: str,
        start: datetime,
        end: datetime,
        *,
        actor: str = "api",
        reason: str | None = None,
        request_id: str | None = None,
    ) -> operations.BackfillReport:
        """Create the jobs of every occurrence in [``start``, ``end``] that has none yet;
        twice creates nothing twice. Audited. The misfire policy does not apply; the overlap
        policy does: under Forbid, BufferOne and Replace they run one at a time, oldest first
        (:func:`tickwork.schedules.policies.backfill_jobs`), under Allow side by side.
        Refuses a range in the future or holding more than ``operations.MAX_BACKFILL``
        (1,000) occurrences (InvalidInput naming their number), and FixedDelay schedules."""
        who = Actor(actor, reason, request_id)
        with self.connection() as conn:
            return operations.backfill(conn, namespace, name, start, end, who, self.clock.now())

    def trigger(
        self: Connected,
        namespace: str,
        name: str,
        *,
        actor: str,
        reason: str | None = None,
        request_id: str | None = None,
    ) -> JobId:
        """One job of the schedule now, outside its timetable (no occurrence); audited.
        Works while suspended; refused for a disabled schedule. A ``request_id`` already used
        for this schedule returns that earlier job and creates nothing."""
        who = Actor(actor, reason, request_id)
        with self.connection() as conn:
            outcome = operations.trigger(conn, namespace, name, who, self.clock.now())
        assert outcome.job_id is not None  # a trigger, replayed or not, names its job
        return outcome.job_id

    def resume_schedule(
        self: Connected,
        namespace: str,
        name: str,
        *,
        actor: str,
        reason: str | None = None,
        request_id: str | None = None,
    ) -> transitions.Outcome:
        """Resume a schedule that ``spec.suspendAfterFailures`` suspended, and count its dead
        occurrences from zero; audited. Refused (InvalidTransition) for a disabled schedule or
        one its own ``spec.suspend`` suspends; ``changed`` is False when there was nothing to
        resume or reset."""
        who = Actor(actor, reason, request_id)
        with self.connection() as conn:
            return resuming.resume(conn, namespace, name, who, self.clock.now())
