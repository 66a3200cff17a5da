"""Planning the firing of one due schedule, pure: which of its due occurrences get a job
(the misfire policy, and FixedDelay's one at a time), and where its next run goes. Time comes
in as arguments; nothing here reads a clock or the database, so it is tested exhaustively on
its own. The overlap (concurrency) policy needs the schedule's open jobs and is applied later
by the firing pass (:mod:`.service`), with :func:`tickwork.schedules.policies.decide_overlap`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol
from zoneinfo import ZoneInfo

from tickwork.schedules import occurrences, policies
from tickwork.schedules.definition import ScheduleDefinition


@dataclass(frozen=True)
class Compiled:
    """A stored definition, parsed once per (namespace, name, revision)."""

    definition: ScheduleDefinition
    timetable: occurrences.Timetable | None
    """None for FixedDelay, whose occurrences start from each due time."""
    zone: ZoneInfo
    delay: timedelta | None


class Due(Protocol):
    """What planning reads of a claimed schedule."""

    @property
    def next_run_at(self) -> datetime: ...
    @property
    def now(self) -> datetime:
        """The claim's time (the database's, unless pinned)."""

    @property
    def missed_before(self) -> datetime | None: ...


@dataclass(frozen=True)
class Planned:
    """The misfire decisions and next run of one schedule."""

    computed: int
    """Occurrences computed (what the pass's budget counts)."""
    fire: tuple[datetime, ...]
    """Occurrences to make jobs of (before the overlap policy)."""
    misfired: int
    """Occurrences thrown away by the misfire policy (and FixedDelay's one-at-a-time)."""
    next_run_at: datetime
    backlog: bool
    """Still due after this pass: a chunk was not enough."""


class NextAfter:
    """``next_after`` remembered for one batch: schedules due together mostly share their
    expression (hourly, daily, ...), so each distinct one is computed once."""

    def __init__(self) -> None:
        self._found: dict[tuple[occurrences.Timetable, ZoneInfo, datetime], datetime] = {}

    def __call__(
        self, timetable: occurrences.Timetable, zone: ZoneInfo, after: datetime
    ) -> datetime:
        key = (timetable, zone, after)
        found = self._found.get(key)
        if found is None:
            found = self._found[key] = timetable.next_after(after, zone)
        return found


def due_occurrences(
    next_after: NextAfter,
    timetable: occurrences.Timetable,
    zone: ZoneInfo,
    first: datetime,
    now: datetime,
    limit: int,
) -> tuple[list[datetime], datetime | None]:
    """Occurrences from ``first`` (due) up to ``now``, at most ``limit``, and the first one
    after ``now`` when the list is complete (None when cut short)."""
    found = [first]
    while len(found) < limit:
        following = next_after(timetable, zone, found[-1])
        if following > now:
            return found, following
        found.append(following)
    return found, None


def plan(due: Due, compiled: Compiled, chunk: int, next_after: NextAfter) -> Planned:
    """Misfire decisions and the next run of one schedule, at most ``chunk`` occurrences
    settled (overlap comes later)."""
    definition = compiled.definition
    timetable: occurrences.Timetable
    if compiled.delay is not None:
        timetable = occurrences.FixedRate(compiled.delay, anchor=due.next_run_at)
    else:
        assert compiled.timetable is not None
        timetable = compiled.timetable
    keep = policies.retained(definition.misfire_policy, definition.catch_up_limit)
    found, following = due_occurrences(
        next_after, timetable, compiled.zone, due.next_run_at, due.now, chunk + keep
    )
    decision = policies.decide_misfire(
        found,
        complete=following is not None,
        now=due.now,
        policy=definition.misfire_policy,
        catch_up_limit=definition.catch_up_limit,
        starting_deadline_seconds=definition.starting_deadline_seconds,
        missed_before=due.missed_before,
    )
    fire, skipped = decision.fire, decision.skipped
    if compiled.delay is not None and len(fire) > 1:
        # FixedDelay: one job at a time, the next run follows its end.
        fire, skipped = fire[-1:], skipped + len(fire) - 1
    if decision.settled < len(found):
        next_run_at: datetime = found[decision.settled]
    elif following is not None:
        next_run_at = following
    else:
        next_run_at = next_after(timetable, compiled.zone, found[-1])
    return Planned(
        computed=len(found),
        fire=fire,
        misfired=skipped,
        next_run_at=next_run_at,
        backlog=next_run_at <= due.now,
    )


def advanced_runs(
    due: Due, compiled: Compiled, next_run_at: datetime | None, fired: bool, created: bool
) -> tuple[datetime | None, datetime | None]:
    """The schedule's next run and ``missed_before`` once its jobs are in: a FixedDelay one
    that fired waits for its job to finish (None), unless its occurrence had a job already;
    ``missed_before`` is kept only while the next run is still before it."""
    if compiled.delay is not None and fired:
        next_run_at = None if created else due.now + compiled.delay
    missed_before = due.missed_before
    if next_run_at is None or (missed_before is not None and next_run_at >= missed_before):
        missed_before = None
    return next_run_at, missed_before
