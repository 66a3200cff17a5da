"""The operators' registry: at most one live operator per owner watches a Kubernetes
namespace.

Before it syncs anything, an operator joins: it registers its scope unless a live operator of
the same owner (``operator:<cluster-name>``) has an overlapping one (the same namespace, or
either watches all namespaces); replicas of one kopf peering object with the same scope do not
count as overlapping (kopf keeps one of them active, :mod:`tickwork.operator.peers`). It then
keeps its entry alive with a heartbeat every third of ``registry_ttl`` and removes it when it
stops. An entry not renewed for ``registry_ttl`` seconds (its operator was killed) no longer
counts, and a start under the same identity (a restarted pod) replaces its entry at once
(should the old run still be alive, it stops at its next heartbeat). A start that finds an
overlapping live entry waits up to ``start_wait`` seconds for it to go (an old pod still
terminating), then refuses with :class:`OperatorConflict`. A running operator whose entry was
lost (it could not renew it for a whole ``registry_ttl``) registers again; if an overlapping
operator took its place meanwhile, it stops with :class:`OperatorConflict` rather than sync
beside it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid

from tickwork import metrics
from tickwork.db.operators import Member, Registration
from tickwork.errors import TickworkError
from tickwork.logs import fields
from tickwork.operator.config import OperatorConfig
from tickwork.operator.database import Database, DatabaseError

log = logging.getLogger(__name__)

FIRST_RETRY_SECONDS = 0.5


class OperatorConflict(TickworkError):
    """A live operator of the same owner watches a namespace of this operator's scope."""


def describe(scope: tuple[str, ...]) -> str:
    return "all namespaces" if not scope else "namespaces " + ", ".join(scope)


class Membership:
    def __init__(self, database: Database, config: OperatorConfig) -> None:
        self.database = database
        self.config = config
        self.registration = Registration(
            owner=config.owner,
            identity=config.identity,
            token=uuid.uuid4().hex + ("" if config.standalone else f"/{config.peering}"),
            scope=config.namespaces,
            host=socket.gethostname(),
            pid=os.getpid(),
            peering=None if config.standalone else config.peering,
        )
        self.joined = False

    def _conflict(self, others: list[Member]) -> str:
        other = others[0]
        return (
            f"another operator of owner {self.config.owner!r} watches "
            f"{describe(other.scope)}: {other.identity!r} (host {other.host}, pid {other.pid}, "
            f"started {other.age_seconds:.0f}s ago); this one would watch "
            f"{describe(self.config.namespaces)}: stop that one, or give this one a disjoint "
            "--namespace or its own --cluster-name"
        )

    async def _try_join(self) -> list[Member]:
        """Register, retrying while the database is unavailable; the overlapping operators
        found instead (empty: registered)."""
        delay = FIRST_RETRY_SECONDS
        while True:
            try:
                others = await self.database.join(self.registration, self.config.registry_ttl)
            except DatabaseError as error:
                metrics.OPERATOR_ERRORS.labels("database").inc()
                log.warning(
                    "registering the operator: database unavailable: %s",
                    " ".join(str(error).split()),
                    extra=fields(action="retry"),
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.config.retry_max_seconds)
                continue
            self.joined = not others
            return others

    async def join(self) -> None:
        """Register, waiting up to ``start_wait`` for overlapping operators to go. Raises
        OperatorConflict."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.start_wait
        waiting = False
        while others := await self._try_join():
            left = deadline - loop.time()
            if left <= 0:
                raise OperatorConflict(f"operator not started: {self._conflict(others)}")
            if not waiting:
                waiting = True
                log.warning(
                    "waiting up to %.0fs for it to stop (its entry expires in %.0fs "
                    "without a heartbeat): %s",
                    left,
                    max(0.0, max(o.expires_in_seconds for o in others)),
                    self._conflict(others),
                    extra=fields(action="wait"),
                )
            await asyncio.sleep(min(left, self.config.registry_ttl / 3, 1.0))
        log.info(
            "registered as %r, watching %s",
            self.config.identity,
            describe(self.config.namespaces),
            extra=fields(action="registered"),
        )

    async def keep(self) -> None:
        """Renew the entry every third of ``registry_ttl``; raises OperatorConflict when it
        was lost and an overlapping operator registered meanwhile."""
        interval = self.config.registry_ttl / 3
        failing = False
        while True:
            await asyncio.sleep(interval)
            try:
                found = await self.database.heartbeat(self.registration, self.config.registry_ttl)
            except DatabaseError as error:
                metrics.OPERATOR_ERRORS.labels("database").inc()
                if not failing:
                    log.warning(
                        "registry heartbeat failed: %s",
                        " ".join(str(error).split()),
                        extra=fields(action="retry"),
                    )
                failing = True
                continue
            failing = False
            if found == "renewed":
                continue
            if found == "replaced":
                self.joined = False
                raise OperatorConflict(
                    f"operator stopped: a newer run under the identity {self.config.identity!r} "
                    "replaced it (give each operator its own --identity)"
                )
            log.warning("the registry entry expired: registering again", extra=fields())
            others = await self._try_join()
            if others:
                raise OperatorConflict(f"operator stopped: {self._conflict(others)}")

    async def leave(self) -> None:
        if not self.joined:
            return
        try:
            await self.database.leave(self.registration)
        except DatabaseError as error:
            log.warning(
                "could not remove the registry entry (it expires by itself): %s",
                " ".join(str(error).split()),
                extra=fields(),
            )
        self.joined = False
