"""The default HTTP port of each long-running role, and where one moves when its port is in
use: kept apart from :mod:`tickwork.http` so a command that only parses its flags does not
load the HTTP server."""

from __future__ import annotations

ROLE_PORTS = frozenset({9090, 9091, 9092, 9093})
"""The default HTTP port of each role: worker, console, operator, ``tickwork dev``'s worker."""
FALLBACK_SPAN = 20
"""How far past its default port a process looks for a free one (:func:`fallback_ports`)."""


def fallback_ports(default: int) -> tuple[int, ...]:
    """Where a process whose *default* port is in use listens instead, in order: the next
    :data:`FALLBACK_SPAN` ports but the other roles' defaults (a second worker on one machine
    moves to 9094, leaving the console its 9091). A port given explicitly never moves."""
    following = range(default + 1, default + 1 + FALLBACK_SPAN)
    return tuple(port for port in following if port not in ROLE_PORTS)
