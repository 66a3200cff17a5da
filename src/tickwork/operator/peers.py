"""Which of the operators sharing a kopf peering object is the active one.

kopf peering pauses every watch of an operator while another live peer of the same peering
object has a priority at least as high (equal priorities pause each other); a peer is live
until ``lastseen + lifetime`` (kopf's keep-alive, every 1 to ``lifetime - 5`` seconds). So the
replicas of one release need different priorities, and a killed active peer is replaced once
its lifetime ran out.

**Priorities.** Unless ``--peering-priority`` pins one, an operator's priority is derived from
its start time, :func:`derived_priority`: the older operator has the higher priority, so the
running one stays active and a replacement pod (a rollout, a restart) becomes the standby;
nothing flaps back and forth. The low three digits are random, against two starts in the same
millisecond. Derived priorities are negative: a kopf operator of the default priority 0 (a
developer's ``kopf run``, ``kopf freeze``) pauses them all.

**What runs where.** kopf's own handlers run only in the active operator (kopf gates them).
Everything tickwork runs beside kopf (the syncer, the status board and loop, run-now answers
from the status loop) runs only while :class:`Watch` finds this operator active, which it
decides from the peering object by kopf's rule, read every ``interval`` seconds: active when the
object exists, holds this operator's own keep-alive, and no other live peer has a priority as
high as this one's. A peering object that
could not be read for a whole lifetime counts as lost (this operator may have been replaced
meanwhile). The admission webhook and the probes serve in both.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import kubernetes

from tickwork import metrics
from tickwork.logs import fields
from tickwork.operator.kube import api_client

log = logging.getLogger(__name__)

GROUP = "kopf.dev"
VERSION = "v1"
CLUSTER_PLURAL = "clusterkopfpeerings"
NAMESPACED_PLURAL = "kopfpeerings"
REQUEST_SECONDS = 5.0
MISSING_WARN_SECONDS = 30.0
"""How long the peering object may be missing, or hold no keep-alive of this operator, before
it is reported (log and ``/readyz``)."""


def derived_priority(started: float, jitter: int | None = None) -> int:
    """kopf priority of an operator started at ``started`` (Unix seconds): higher for an
    earlier start, with three random low digits (``jitter``, 0-999) against ties."""
    low = random.randrange(1000) if jitter is None else jitter
    return -(int(started * 1000) * 1000 + low)


@dataclass(frozen=True)
class Peer:
    identity: str
    priority: int
    deadline: float
    """Unix time when it stops counting without a keep-alive."""

    @classmethod
    def of(cls, identity: str, info: Mapping[str, Any]) -> Peer:
        lastseen = info.get("lastseen")
        seen = _timestamp(str(lastseen)) if lastseen else time.time()
        return cls(identity, int(info.get("priority", 0)), seen + int(info.get("lifetime", 60)))


def _timestamp(iso: str) -> float:
    moment = datetime.fromisoformat(iso)
    return (moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)).timestamp()


def blockers(
    statuses: Sequence[Mapping[str, Any]], identity: str, priority: int, now: float
) -> list[Peer]:
    """The live peers (not this one) that keep it paused: a priority as high as ``priority``."""
    found = []
    for status in statuses:
        for name, info in status.items():
            if name == identity or not isinstance(info, Mapping):
                continue
            peer = Peer.of(name, info)
            if peer.deadline > now and peer.priority >= priority:
                found.append(peer)
    return found


class Missing(Exception):
    """A peering object (or its CRD) does not exist."""


class Reader:
    """Reads the peering objects: the ClusterKopfPeering ``name`` (``namespaces`` empty), else
    the KopfPeering ``name`` of each watched namespace, as kopf does."""

    def __init__(self, name: str, namespaces: Sequence[str]) -> None:
        self.name = name
        self.namespaces = tuple(namespaces)

    def where(self) -> str:
        if not self.namespaces:
            return f"ClusterKopfPeering {self.name!r}"
        return f"KopfPeering {self.name!r} in namespaces {', '.join(self.namespaces)}"

    def statuses(self) -> list[Mapping[str, Any]]:
        """Each object's ``status`` (the peers); raises Missing, or the client's error."""
        with api_client() as client:
            api = kubernetes.client.CustomObjectsApi(client)
            bodies: list[Any]
            try:
                if not self.namespaces:
                    bodies = [
                        api.get_cluster_custom_object(
                            GROUP,
                            VERSION,
                            CLUSTER_PLURAL,
                            self.name,
                            _request_timeout=REQUEST_SECONDS,
                        )
                    ]
                else:
                    bodies = [
                        api.get_namespaced_custom_object(
                            GROUP,
                            VERSION,
                            namespace,
                            NAMESPACED_PLURAL,
                            self.name,
                            _request_timeout=REQUEST_SECONDS,
                        )
                        for namespace in self.namespaces
                    ]
            except kubernetes.client.ApiException as error:
                if error.status == 404:
                    raise Missing(self.where()) from None
                raise
        return [body.get("status") or {} for body in bodies]


class Watch:
    """Follows the peering object; awaits ``on_change(True)`` when this operator becomes the
    active one and ``on_change(False)`` when it stops being it. It starts as the standby."""

    def __init__(
        self,
        statuses: Callable[[], list[Mapping[str, Any]]],
        *,
        identity: str,
        priority: int,
        lifetime: float,
        interval: float,
        where: str,
        on_change: Callable[[bool], Awaitable[None]],
        on_missing: Callable[[str | None], None] = lambda reason: None,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.statuses = statuses
        self.identity = identity
        self.priority = priority
        self.lifetime = lifetime
        self.interval = interval
        self.where = where
        self.on_change = on_change
        self.on_missing = on_missing
        self.now = now
        self.active = False
        self.changed = asyncio.Event()
        """Set on every change (for tests and waiting callers)."""
        self._read_at: float | None = None
        self._missing_since: float | None = None
        self._warned = False
        self._decided = False
        self._failing = False

    async def run(self) -> None:
        metrics.OPERATOR_ACTIVE.set(0)
        while True:
            await self.check()
            await asyncio.sleep(self.interval)

    async def check(self) -> None:
        active = await self._decide()
        if active != self.active:
            self.active = active
            metrics.OPERATOR_ACTIVE.set(1 if active else 0)
            await self.on_change(active)
            self.changed.set()

    async def _decide(self) -> bool:
        now = self.now()
        try:
            statuses = await asyncio.to_thread(self.statuses)
        except Missing as missing:
            self._missing(
                now,
                f"the peering object is missing ({missing}): kopf pauses every watch while its "
                "peering CRDs (kopfpeerings.kopf.dev, clusterkopfpeerings.kopf.dev) or the "
                "object are missing, so nothing syncs: apply them or run with --standalone",
            )
            return False
        except Exception as error:  # unreachable: keep the decision for a lifetime at most
            metrics.OPERATOR_ERRORS.labels("watch").inc()
            if not self._failing:
                log.warning("reading the peering object failed: %s", error, extra=fields())
            self._failing = True
            return self.active and (
                self._read_at is not None and now - self._read_at < self.lifetime
            )
        self._read_at = now
        self._failing = False
        if not any(self.identity in status for status in statuses):
            # Not announced yet (kopf's first keep-alive): the others cannot see it.
            self._missing(
                now,
                f"{self.where} holds no keep-alive of this operator ({self.identity!r}), so it "
                "stays the standby and nothing syncs: can it patch the peering object (RBAC)?",
            )
            return False
        if self._warned:
            self.on_missing(None)
        self._missing_since = None
        self._warned = False
        found = blockers(statuses, self.identity, self.priority, now)
        if found and (self.active or not self._decided):
            log.info(
                "standby: operator %s of peering %s is live with priority %d, not below this "
                "one's (%d)",
                found[0].identity,
                self.where,
                found[0].priority,
                self.priority,
                extra=fields(action="standby"),
            )
        self._decided = True
        return not found

    def _missing(self, now: float, reason: str) -> None:
        """Warn once (and tell ``on_missing``) when it lasted :data:`MISSING_WARN_SECONDS`."""
        if self._missing_since is None:
            self._missing_since = now
        if now - self._missing_since < MISSING_WARN_SECONDS or self._warned:
            return
        log.warning("%s", reason, extra=fields(action="paused"))
        self._warned = True
        self.on_missing(reason)


class Always:
    """The standalone operator: always active."""

    active = True

    def __init__(self, on_change: Callable[[bool], Awaitable[None]]) -> None:
        self.on_change = on_change
        self.changed = asyncio.Event()

    async def run(self) -> None:
        metrics.OPERATOR_ACTIVE.set(1)
        await self.on_change(True)
        self.changed.set()
        await asyncio.Event().wait()
