"""The ``Served`` condition (pure): whether the live workers fire a schedule's namespace and run
its jobs (their kind, in their queue), from one read of ``tickwork.workers`` per status round.

A worker fires only the schedule namespaces it offers (``--namespaces``) and claims only jobs
of the kinds it registers in the queues it serves (``--queues``), from whichever namespace, so
the firing and the claiming worker may be different ones, but the kind and the queue must be
one worker's: ``True`` (``WorkersAvailable``) when at least one live worker offers the
namespace and at least one registers the kind and serves the queue; ``False`` with
``NoWorker`` (no live worker offers the namespace: nothing fires), ``KindNotRegistered`` (it
fires, but no live worker runs the kind: the jobs wait) or ``QueueNotServed`` (workers run the
kind, but none of them claims from the job's queue: the jobs wait), ``NamespacePaused`` (the
schedule namespace is paused: nothing fires until it is resumed) or ``QueuePaused`` (the job's
queue is paused: its jobs wait); ``Unknown`` with ``DatabaseUnavailable`` (the workers could
not be read), ``Pending`` (not read yet) or ``NoDefinition`` (no valid spec and nothing
stored: there is no kind to serve). Live means seen within the fleet's worker TTL, as the
fleet gauges count them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from tickwork.operator.status import Ready
from tickwork.schedules import container_jobs, tenancy

CONTAINER_HINT = (
    " (it runs the Kubernetes Jobs of a spec.jobTemplate: run a worker pool with container "
    "jobs enabled, tickwork worker --container-jobs or the chart's workerPools[].containerJobs)"
)
"""Added to KindNotRegistered for the reserved kind of container jobs."""

WORKERS_AVAILABLE = "WorkersAvailable"
NO_WORKER = "NoWorker"
KIND_NOT_REGISTERED = "KindNotRegistered"
QUEUE_NOT_SERVED = "QueueNotServed"
PENDING = "Pending"
NO_DEFINITION = "NoDefinition"
DATABASE_UNAVAILABLE = "DatabaseUnavailable"
NAMESPACE_PAUSED = "NamespacePaused"
QUEUE_PAUSED = "QueuePaused"


class Offer(Protocol):
    """What a live worker's row says it does."""

    @property
    def namespaces(self) -> Sequence[str]: ...

    @property
    def kinds(self) -> Sequence[str]: ...

    @property
    def queues(self) -> Sequence[str]: ...


class Pause(Protocol):
    """A paused queue or schedule namespace (a row of ``tickwork.pauses``)."""

    @property
    def scope(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def paused_by(self) -> str: ...


@dataclass(frozen=True)
class Fleet:
    """The live workers, counted by the namespaces they fire and the kinds they run."""

    live: int = 0
    firing: Counter[str] = field(default_factory=Counter)
    """Schedule namespace -> live workers offering it."""
    running: Counter[str] = field(default_factory=Counter)
    """Kind -> live workers registering it."""
    claiming: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(kind, queue) -> live workers registering the kind and serving the queue."""
    paused: dict[tuple[str, str], str] = field(default_factory=dict)
    """(scope, name) of each paused queue and schedule namespace -> who paused it."""

    @classmethod
    def of(cls, workers: Iterable[Offer], pauses: Iterable[Pause] = ()) -> Fleet:
        firing: Counter[str] = Counter()
        running: Counter[str] = Counter()
        claiming: Counter[tuple[str, str]] = Counter()
        live = 0
        for worker in workers:
            live += 1
            firing.update(set(worker.namespaces))
            running.update(set(worker.kinds))
            claiming.update({(kind, queue) for kind in worker.kinds for queue in worker.queues})
        paused = {(pause.scope, pause.name): pause.paused_by for pause in pauses}
        return cls(live, firing, running, claiming, paused)


def served(
    fleet: Fleet | None,
    namespace: str,
    kind: str | None,
    queue: str,
    *,
    database_error: str | None,
) -> Ready:
    """The Served condition of a schedule of ``namespace`` whose jobs are of ``kind`` (None:
    unknown) in ``queue``, given the fleet last read (None: not read yet)."""
    if database_error is not None:
        return Ready("Unknown", DATABASE_UNAVAILABLE, database_error)
    if fleet is None:
        return Ready("Unknown", PENDING, "the workers have not been read yet")
    if kind is None:
        return Ready(
            "Unknown", NO_DEFINITION, "no valid definition is stored, so there is no kind to run"
        )
    if (by := fleet.paused.get(("namespace", namespace))) is not None:
        policy = tenancy.pausing_policy(by)
        how = (
            f"tickwork namespaces resume {namespace}"
            if policy is None
            else f"TenantPolicy {policy!r} sets spec.paused: false"
        )
        return Ready(
            "False",
            NAMESPACE_PAUSED,
            f"schedule namespace {namespace!r} is paused (by {by}): its schedules fire nothing "
            f"until it is resumed ({how})",
        )
    if (by := fleet.paused.get(("queue", queue))) is not None:
        return Ready(
            "False",
            QUEUE_PAUSED,
            f"queue {queue!r} is paused (by {by}): its jobs wait until it is resumed "
            f"(tickwork queues resume {queue})",
        )
    firing, running = fleet.firing[namespace], fleet.running[kind]
    if not firing:
        return Ready(
            "False",
            NO_WORKER,
            f"no live worker offers schedule namespace {namespace!r} (live workers: "
            f"{fleet.live}; a worker fires the namespaces of its --namespaces), so its "
            "occurrences are not fired",
        )
    if not running:
        return Ready(
            "False",
            KIND_NOT_REGISTERED,
            f"{_count(firing, 'offers', 'offer')} schedule namespace {namespace!r}, but none of "
            f"the {fleet.live} live workers registers kind {kind!r}: its jobs wait unclaimed"
            + (CONTAINER_HINT if kind == container_jobs.KIND else ""),
        )
    claiming = fleet.claiming[(kind, queue)]
    if not claiming:
        return Ready(
            "False",
            QUEUE_NOT_SERVED,
            f"{_count(running, 'registers', 'register')} kind {kind!r}, but none of them "
            f"serves queue {queue!r} (a worker claims from the queues of its --queues): its "
            "jobs wait unclaimed",
        )
    return Ready(
        "True",
        WORKERS_AVAILABLE,
        f"{_count(firing, 'offers', 'offer')} schedule namespace {namespace!r}; "
        f"{_count(claiming, 'registers', 'register')} kind {kind!r} and "
        f"{'serves' if claiming == 1 else 'serve'} queue {queue!r}",
    )


def _count(workers: int, one: str, many: str) -> str:
    """ "1 live worker offers", "2 live workers offer"."""
    return f"1 live worker {one}" if workers == 1 else f"{workers} live workers {many}"
