"""Operations on the operators' registry and on the scope recorded per schedule namespace
(``db/sql/operators.sql``). A scope is the tuple of Kubernetes namespaces an operator watches;
empty means all of them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tickwork.db.store import Op, Row

Scope = tuple[str, ...]


def _nothing(rows: list[Row]) -> None:
    return None


def _names(rows: list[Row]) -> list[str]:
    return [row[0] for row in rows]


@dataclass(frozen=True)
class Registration:
    """One run of an operator, as it registers itself."""

    owner: str
    identity: str
    token: str
    """Random per run."""
    scope: Scope
    host: str
    pid: int


@dataclass(frozen=True)
class Member:
    """A live operator found in the registry."""

    identity: str
    scope: Scope
    host: str
    pid: int
    age_seconds: float
    """Since it started."""
    expires_in_seconds: float
    """Until its entry expires without a heartbeat."""


def lock_owner(owner: str) -> Op[None]:
    return Op("operator_lock_owner", {"owner": owner}, _nothing)


def clear(owner: str, identity: str) -> Op[None]:
    """Remove the owner's expired entries and the previous run of ``identity``."""
    return Op("operator_clear", {"owner": owner, "identity": identity}, _nothing)


def overlapping(owner: str, scope: Scope) -> Op[list[Member]]:
    return Op(
        "operator_overlapping",
        {"owner": owner, "scope": list(scope)},
        lambda rows: [Member(r[0], tuple(r[1]), r[2], r[3], r[4], r[5]) for r in rows],
    )


def insert(registration: Registration, ttl_seconds: float) -> Op[None]:
    return Op(
        "operator_insert",
        {
            "owner": registration.owner,
            "identity": registration.identity,
            "token": registration.token,
            "scope": list(registration.scope),
            "host": registration.host,
            "pid": registration.pid,
            "ttl_seconds": ttl_seconds,
        },
        _nothing,
    )


def heartbeat(registration: Registration, ttl_seconds: float) -> Op[str]:
    """Extend the entry: ``renewed``, else ``replaced`` (a run of the same identity took it
    over) or ``gone`` (it expired)."""
    return Op(
        "operator_heartbeat",
        {
            "owner": registration.owner,
            "identity": registration.identity,
            "token": registration.token,
            "ttl_seconds": ttl_seconds,
        },
        lambda rows: str(rows[0][0]),
    )


def leave(registration: Registration) -> Op[None]:
    params = {
        "owner": registration.owner,
        "identity": registration.identity,
        "token": registration.token,
    }
    return Op("operator_leave", params, _nothing)


def namespaces_in_scope(owner: str, scope: Scope) -> Op[list[str]]:
    """The schedule namespaces an operator of ``scope`` prunes at start."""
    return Op("operator_namespaces_in_scope", {"owner": owner, "scope": list(scope)}, _names)


@dataclass(frozen=True)
class NamespaceScope:
    owner: str
    scope: Scope | None
    """The scope that last synced it; None: none recorded."""


def lock_namespace(namespace: str) -> Op[NamespaceScope | None]:
    """The namespace's owner and recorded scope, locked; None when it does not exist yet."""
    return Op(
        "operator_namespace_lock",
        {"namespace": namespace},
        lambda rows: (
            NamespaceScope(rows[0][0], None if rows[0][1] is None else tuple(rows[0][1]))
            if rows
            else None
        ),
    )


def record_scope(namespace: str, owner: str, scope: Scope | None) -> Op[None]:
    return Op(
        "operator_namespace_record",
        {"namespace": namespace, "owner": owner, "scope": None if scope is None else list(scope)},
        _nothing,
    )


def overlaps(a: Sequence[str], b: Sequence[str]) -> bool:
    """Whether two scopes share a namespace (an empty scope is every namespace)."""
    return not a or not b or bool(set(a) & set(b))
