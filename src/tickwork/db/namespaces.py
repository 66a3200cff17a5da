"""Operations on ``tickwork.schedule_namespaces`` (``db/sql/namespaces.sql``): the owner of each
schedule namespace, taken by a sync, and the operator scope that last synced it. A scope is
the tuple of Kubernetes namespaces an operator watches; empty means all of them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from tickwork.db.store import Op, column, nothing

Scope = tuple[str, ...]


@dataclass(frozen=True)
class NamespaceLock:
    owner: str
    now: datetime


def lock_namespace(namespace: str, owner: str, now: datetime | None) -> Op[NamespaceLock]:
    """Create the namespace (owned by ``owner``) if new, and lock it for the transaction."""
    return Op(
        "namespace_lock",
        {"namespace": namespace, "owner": owner, "now": now},
        lambda rows: NamespaceLock(rows[0]["owner"], rows[0]["now"]),
    )


def take_over_namespace(namespace: str, owner: str, now: datetime | None) -> Op[None]:
    return Op(
        "namespace_take_over",
        {"namespace": namespace, "owner": owner, "now": now},
        nothing,
    )


def namespaces_in_scope(owner: str, scope: Scope) -> Op[list[str]]:
    """The schedule namespaces an operator of ``scope`` prunes at start."""
    return Op("namespace_in_scope", {"owner": owner, "scope": list(scope)}, column("namespace"))


@dataclass(frozen=True)
class NamespaceScope:
    owner: str
    scope: Scope | None
    """The scope that last synced it; None: none recorded."""


def lock_scope(namespace: str) -> Op[NamespaceScope | None]:
    """The namespace's owner and recorded scope, locked; None when it does not exist yet."""
    return Op(
        "namespace_lock_scope",
        {"namespace": namespace},
        lambda rows: (
            NamespaceScope(
                rows[0]["owner"],
                None if rows[0]["operator_scope"] is None else tuple(rows[0]["operator_scope"]),
            )
            if rows
            else None
        ),
    )


def record_scope(namespace: str, owner: str, scope: Scope | None) -> Op[None]:
    return Op(
        "namespace_record_scope",
        {"namespace": namespace, "owner": owner, "scope": None if scope is None else list(scope)},
        nothing,
    )
