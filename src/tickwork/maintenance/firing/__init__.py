"""Firing: turn the due occurrences of the schedules a worker offers into jobs.

One transaction per batch: claim up to ``batch`` due schedules with SKIP LOCKED, compute their
due occurrences, apply the misfire and overlap policies, then insert every job and advance
every schedule with one statement (an occurrence that already has a job is left alone: the
unique occurrence key makes any number of workers harmless; the advance is fenced by the
revision read at claim). Schedules that fire alike (same parsed definition, due time and
decisions, nothing of their own in their jobs: no carried state, jitter, container or
BufferOne key) share one outcome in that statement, so planning and the parameters cost per
distinct outcome, not per schedule. A crash anywhere rolls the whole batch back; the next
worker fires it.

Isolation: a schedule whose firing fails for a reason of its own is set aside and the rest of
its batch fires. Its stored spec may not be readable by this version, planning it may raise,
or PostgreSQL may refuse its job or its advance: the batch's writes go inside one savepoint,
and only when that fails (with anything but a connection or server error) are they redone in
halves, each in its own savepoint, until the culprits stand alone. A schedule that failed
before goes in a savepoint of its own from the start. Each culprit keeps its next run,
records its error on its row (``firing_error``, ``firing_failures``) and is not claimed again
before ``firing_retry_at``: RETRY_FIRST after the first failure, doubling up to RETRY_MAX.
The first firing that works, or a sync that changes the definition, clears it. A connection error
still rolls the whole batch back; the next pass retries.

Workers share out their namespaces (:mod:`.shares`): each claims its own share first, and
the others' only once a claim of its own comes back short or they are ``share_wait`` overdue,
so workers racing through a backlog of the same namespaces do not walk past each other's
locked rows. A worker fires a backlog with ``connections`` passes at once, each on its own
connection and given a part of its share, so one plans while another waits for the database.

A schedule with a long backlog is settled at most ``chunk`` occurrences per pass; the pass
continues with it until nothing due is left. The loop sleeps until the earliest next run of
its namespaces, or until a ``tickwork_schedules`` notification (a sync, a FixedDelay job that
finished) wakes it; the cap on its sleep covers a lost notification.

The parts: :mod:`.config` (settings and the pass's report), :mod:`.planner` (pure: misfire
decisions and next runs), :mod:`.cache` (parsed definitions), :mod:`.shares` (who fires what
first), :mod:`.service` (the pass, its SQL in :mod:`tickwork.db.schedules`), :mod:`.metrics`
(what a committed batch counts and logs) and :mod:`.loop`. Everything logs as
``tickwork.maintenance.firing``.
"""

from tickwork.maintenance.firing.cache import DefinitionCache, Warmed, warm
from tickwork.maintenance.firing.config import FireReport, FiringConfig
from tickwork.maintenance.firing.loop import loop
from tickwork.maintenance.firing.service import Firing, run_once
from tickwork.maintenance.firing.shares import Shares

CHANNEL = "tickwork_schedules"
"""Notified with a namespace when its schedules changed or a FixedDelay run was set."""

__all__ = [
    "CHANNEL",
    "DefinitionCache",
    "FireReport",
    "Firing",
    "FiringConfig",
    "Shares",
    "Warmed",
    "loop",
    "run_once",
    "warm",
]
