"""Operations on the operators' registry, ``tickwork.operators`` (``db/sql/operators.sql``; the
scope recorded per schedule namespace is in :mod:`tickwork.db.namespaces`). A scope is the
tuple of Kubernetes namespaces an operator watches; empty means all of them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tickwork.db import budget
from tickwork.db.namespaces import Scope as Scope
from tickwork.db.store import Op, nothing


@dataclass(frozen=True)
class Registration:
    """One run of an operator, as it registers itself."""

    owner: str
    identity: str
    token: str
    """Random per run; ``<random>/<peering>`` for an operator that takes part in kopf peering
    (the registry has no column of its own for it)."""
    scope: Scope
    host: str
    pid: int
    peering: str | None = None
    """The kopf peering object's name (None: ``--standalone``): replicas of one peering
    object watching the same scope are one operator to the registry, kopf keeps one of them
    active."""
    connections: int | None = budget.operator().total
    """The most connections it holds on the server (:func:`tickwork.db.budget.operator`)."""


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
    return Op("operator_lock_owner", {"owner": owner}, nothing)


def clear(owner: str, identity: str) -> Op[None]:
    """Remove the owner's expired entries and the previous run of ``identity``."""
    return Op("operator_clear", {"owner": owner, "identity": identity}, nothing)


def overlapping(owner: str, scope: Scope, peering: str | None = None) -> Op[list[Member]]:
    """The live operators of ``owner`` whose scope overlaps ``scope``, but for the replicas of
    the ``peering`` object with the same scope."""
    return Op(
        "operator_overlapping",
        {"owner": owner, "scope": list(scope), "peering": peering or ""},
        lambda rows: [Member(**{**r, "scope": tuple(r["scope"])}) for r in rows],
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
            "connections": registration.connections,
            "ttl_seconds": ttl_seconds,
        },
        nothing,
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
        lambda rows: str(rows[0]["outcome"]),
    )


def leave(registration: Registration) -> Op[None]:
    params = {
        "owner": registration.owner,
        "identity": registration.identity,
        "token": registration.token,
    }
    return Op("operator_leave", params, nothing)


def overlaps(a: Sequence[str], b: Sequence[str]) -> bool:
    """Whether two scopes share a namespace (an empty scope is every namespace)."""
    return not a or not b or bool(set(a) & set(b))
