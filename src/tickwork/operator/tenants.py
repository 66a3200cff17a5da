"""The ``TenantPolicy`` objects the operator watches (cluster-scoped, ``tickwork.io/v1``): the
policies in force, by name, and their listing for the complete-view barrier, so that no sync
after a start applies a partial set of policies (a Schedule a missing policy allows would be
refused, and its definition disabled)."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

import kubernetes

from tickwork.operator.config import GROUP, VERSION
from tickwork.operator.kube import api_client
from tickwork.operator.listing import ListedKey, VersionedKey
from tickwork.schedules.tenancy import TenantPolicy, policy_of

PLURAL = "tenantpolicies"


class MissingPolicyCRD(Exception):
    """The API server has no TenantPolicy resource: the CRD was not applied."""

    def __str__(self) -> str:
        return (
            "the TenantPolicy CRD (tenantpolicies.tickwork.io) is not installed, so nothing "
            "syncs: kubectl apply -f crds/tenantpolicies.tickwork.io.yaml (or helm upgrade with "
            "crds.enabled=true)"
        )


class Policies:
    """The policies in force, as the watch reports them."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._seen: dict[str, tuple[str | None, TenantPolicy]] = {}
        self._versions: dict[str, tuple[str | None, float]] = {}
        """Per policy: its resourceVersion and when it was observed (monotonic)."""
        self.monotonic = monotonic

    def observe(self, event_type: str | None, body: Mapping[str, Any]) -> bool:
        """Apply one watch event; returns whether the policies changed."""
        metadata = body.get("metadata") or {}
        name, uid = str(metadata.get("name") or ""), metadata.get("uid")
        if event_type == "DELETED":
            self._versions.pop(name, None)
            return self._seen.pop(name, None) is not None
        version = metadata.get("resourceVersion")
        self._versions[name] = (version if isinstance(version, str) else None, self.monotonic())
        seen = (uid if isinstance(uid, str) else None, policy_of(body))
        if self._seen.get(name) == seen:
            return False
        self._seen[name] = seen
        return True

    def current(self) -> tuple[TenantPolicy, ...]:
        return tuple(policy for _, policy in self._seen.values())

    def keys(self) -> set[ListedKey]:
        return {("", name, uid) for name, (uid, _) in self._seen.items()}

    def versions(self) -> set[VersionedKey]:
        return {
            ("", name, uid, self._versions.get(name, (None, 0.0))[0])
            for name, (uid, _) in self._seen.items()
        }

    def forget_unlisted(self, listed: Collection[VersionedKey], since: float) -> bool:
        """Drop the policies observed before ``since`` that a listing taken then no longer
        holds (deleted while the watch was paused); returns whether any was dropped."""
        present = {key[:3] for key in listed}
        gone = [
            name
            for name, (uid, _) in self._seen.items()
            if ("", name, uid) not in present and self._versions.get(name, (None, 0.0))[1] < since
        ]
        for name in gone:
            del self._seen[name]
            self._versions.pop(name, None)
        return bool(gone)


def listed_keys() -> set[ListedKey]:
    """Every TenantPolicy the API server lists (blocking: run it in a thread)."""
    return {key[:3] for key in listed_versions()}


def listed_versions() -> set[VersionedKey]:
    """Every TenantPolicy the API server lists, with its resourceVersion (blocking)."""
    return {
        (
            "",
            item["metadata"]["name"],
            item["metadata"].get("uid"),
            item["metadata"].get("resourceVersion"),
        )
        for item in _listed()
    }


def listed_policies() -> list[TenantPolicy]:
    """The policies of every TenantPolicy the API server lists (blocking)."""
    return [policy_of(item) for item in _listed()]


def _listed() -> list[dict[str, Any]]:
    with api_client() as client:
        try:
            page: Any = kubernetes.client.CustomObjectsApi(client).list_cluster_custom_object(
                GROUP, VERSION, PLURAL
            )
        except kubernetes.client.ApiException as error:
            if error.status == 404:
                raise MissingPolicyCRD() from None
            raise
    return list(page.get("items", []))
