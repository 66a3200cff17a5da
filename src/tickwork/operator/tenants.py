"""The ``TenantPolicy`` objects the operator watches (cluster-scoped, ``tickwork.io/v1``): the
policies in force, by name, and their listing for the complete-view barrier, so that no sync
after a start applies a partial set of policies (a Schedule a missing policy allows would be
refused, and its definition disabled)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kubernetes

from tickwork.operator.config import GROUP, VERSION
from tickwork.operator.kube import api_client
from tickwork.operator.listing import ListedKey
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

    def __init__(self) -> None:
        self._seen: dict[str, tuple[str | None, TenantPolicy]] = {}

    def observe(self, event_type: str | None, body: Mapping[str, Any]) -> bool:
        """Apply one watch event; returns whether the policies changed."""
        metadata = body.get("metadata") or {}
        name, uid = str(metadata.get("name") or ""), metadata.get("uid")
        if event_type == "DELETED":
            return self._seen.pop(name, None) is not None
        seen = (uid if isinstance(uid, str) else None, policy_of(body))
        if self._seen.get(name) == seen:
            return False
        self._seen[name] = seen
        return True

    def current(self) -> tuple[TenantPolicy, ...]:
        return tuple(policy for _, policy in self._seen.values())

    def keys(self) -> set[ListedKey]:
        return {("", name, uid) for name, (uid, _) in self._seen.items()}


def listed_keys() -> set[ListedKey]:
    """Every TenantPolicy the API server lists (blocking: run it in a thread)."""
    return {("", item["metadata"]["name"], item["metadata"].get("uid")) for item in _listed()}


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
