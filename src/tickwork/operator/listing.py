"""The complete-view barrier: no pruning until the index holds every Schedule that exists.

After a start, kopf fills its index from a listing and a watch; until that is done, a
namespace's view is partial and pruning it would disable Schedules that still exist. So before
its first sync the operator lists the Schedules itself (through the official client, logged in
the way kubectl does: the in-cluster service account, else ``$KUBECONFIG``) and waits until
every object listed is in the index. Objects created after that list are either in the index
or not in PostgreSQL yet; objects deleted since are gone from the next list. Afterwards the
index only loses an entry when its object is gone, so a broken watch leaves a stale superset
(which prunes nothing wrongly), never a partial view.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import kubernetes

from tickwork.logs import fields
from tickwork.operator.config import GROUP, PLURAL, VERSION
from tickwork.operator.kube import api_client

log = logging.getLogger(__name__)

ListedKey = tuple[str, str, str | None]
"""(namespace, name, uid) of a Schedule object."""
VersionedKey = tuple[str, str, str | None, str | None]
"""(namespace, name, uid, resourceVersion) of an object."""


class Lister:
    """Lists the Schedules of the watched namespaces (all when ``namespaces`` is empty)."""

    def __init__(self, namespaces: Sequence[str]) -> None:
        self.namespaces = tuple(namespaces)

    def keys(self) -> set[ListedKey]:
        return {key[:3] for key in self.versions()}

    def versions(self) -> set[VersionedKey]:
        with api_client() as client:
            api = kubernetes.client.CustomObjectsApi(client)
            pages: list[Any]
            if not self.namespaces:
                pages = [api.list_cluster_custom_object(GROUP, VERSION, PLURAL)]
            else:
                pages = [
                    api.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
                    for namespace in self.namespaces
                ]
        return {
            (
                item["metadata"].get("namespace", ""),
                item["metadata"]["name"],
                item["metadata"].get("uid"),
                item["metadata"].get("resourceVersion"),
            )
            for page in pages
            for item in page.get("items", [])
        }


STALLED_SECONDS = 30.0
"""How long the index may lag the listing before the wait is reported as stalled."""


class Remembered:
    """A listing function that remembers its last result and when it was taken (monotonic)."""

    def __init__(
        self, listed: Callable[[], set[Any]], monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self.listed = listed
        self.monotonic = monotonic
        self.started = 0.0
        self.last: frozenset[Any] = frozenset()

    def __call__(self) -> set[Any]:
        started = self.monotonic()
        found = self.listed()
        self.started, self.last = started, frozenset(found)
        return set(found)


def stalled_reason(missing: int, waited: float, peering: str | None) -> str:
    """Why the operator syncs nothing yet, for the log and ``/readyz``."""
    cause = (
        "kopf pauses every watch while its peering CRDs (kopfpeerings.kopf.dev, "
        "clusterkopfpeerings.kopf.dev) are missing or another operator holds peering "
        f"{peering!r}: apply the peering CRDs or run with --standalone"
        if peering
        else "the watches deliver nothing: check the operator's RBAC and the API server"
    )
    return (
        f"{missing} Schedules listed but not indexed after {waited:.0f}s, so nothing syncs; {cause}"
    )


async def wait_for_complete_view(
    listed: Callable[[], set[Any]],
    indexed: Callable[[], set[Any]],
    *,
    interval: float,
    on_error: Callable[[Exception], None],
    on_stalled: Callable[[str | None], None] = lambda reason: None,
    peering: str | None = None,
    monotonic: Callable[[], float] = time.monotonic,
) -> None:
    """Return once every object ``listed`` returns is ``indexed``; list again until then.
    Waiting longer than :data:`STALLED_SECONDS` logs a WARNING and gives ``on_stalled`` the
    reason (then None once the view is complete)."""
    started = monotonic()
    stalled = False
    while True:
        try:
            missing = await asyncio.to_thread(listed)
        except Exception as error:  # the API server is unreachable: try again
            on_error(error)
        else:
            missing -= indexed()
            if not missing:
                if stalled:
                    on_stalled(None)
                return
            waited = monotonic() - started
            if waited < STALLED_SECONDS:
                log.info("waiting for %d Schedules to be indexed before syncing", len(missing))
            else:
                reason = stalled_reason(len(missing), waited, peering)
                if not stalled:
                    log.warning("%s", reason, extra=fields(action="paused"))
                stalled = True
                on_stalled(reason)
        await asyncio.sleep(interval)
