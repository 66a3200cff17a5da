"""A worker process's identity: its name, for people (logs, ``picked_by``, the console), and
its incarnation, a random uuid made at each process start, which claims record and which
adoption, heartbeats and the workers row go by. Two processes given one name therefore never
take each other's jobs.

Registering takes the name unless another live process holds it (its row was refreshed within
``--worker-ttl-seconds``; a deregistered or silent holder frees it). Then an explicit name
(``--name``, ``TICKWORK_NAME``) is refused, one line naming the other process (host, pid, last
heartbeat): two processes configured alike is a mistake to fix, not to paper over. The default
name (``$POD_NAME``, else ``hostname-pid``) takes a suffix from the incarnation instead
(``name-1a2b3c4d``): a Deployment passing its own name as ``POD_NAME``, or a pod restarted
before its old row expired, must still start.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC
from uuid import UUID

from tickwork.db.workers import Holder
from tickwork.errors import TickworkError
from tickwork.settings.worker import default_worker_name

TRIES = 3
"""Registrations of one name before giving up (a holder committing at that very moment is not
seen by the statement that could not take the name: it is tried again)."""


class NameTaken(TickworkError):
    """Another live worker process holds the name."""


def suffixed(name: str, incarnation: UUID) -> str:
    """``name`` made unique with the start of ``incarnation``."""
    return f"{name}-{incarnation.hex[:8]}"


def refusal(name: str, holder: Holder | None) -> str:
    """The one line a process that cannot take ``name`` exits with."""
    other = (
        "another process"
        if holder is None
        else f"host {holder.host}, pid {holder.pid}, last heartbeat "
        f"{holder.last_seen_at.astimezone(UTC).isoformat(timespec='seconds')}"
    )
    return (
        f"--name {name}: a live worker already has this name ({other}); give each process its "
        "own name, or stop the other one (a name is free again once its worker stopped, or "
        "missed its heartbeats for --worker-ttl-seconds)"
    )


async def register(
    write: Callable[[str], Awaitable[Holder | None]], name: str, incarnation: UUID
) -> str:
    """The name ``write`` registered this process (``incarnation``) under: ``name``, or for the
    default name, ``name`` with a suffix when a live process holds it. ``write(name)`` returns
    who holds the name after trying (None: unknown yet). Raises :class:`NameTaken`."""
    candidates = [name, suffixed(name, incarnation)] if name == default_worker_name() else [name]
    holder: Holder | None = None
    for candidate in candidates:
        for _ in range(TRIES):
            holder = await write(candidate)
            if holder is not None:
                break
        if holder is not None and holder.incarnation == incarnation:
            return candidate
    raise NameTaken(refusal(name, holder))
