"""An App whose database cannot be reached says so in one clear error (where and why, never
the password) at its first call, within the connect timeout — not a PoolTimeout after it."""

from __future__ import annotations

import socket

import pytest

import tickwork
from tickwork.errors import DatabaseUnavailable


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # nothing listens on it once the socket is closed


def test_an_unreachable_database_is_one_clear_error() -> None:
    port = _closed_port()
    app = tickwork.App(f"postgresql://ada:s3cret@127.0.0.1:{port}/app?connect_timeout=2")
    with pytest.raises(DatabaseUnavailable) as raised:
        app.enqueue("k", {})
    message = str(raised.value)
    assert message.startswith(f"cannot connect to the database at 127.0.0.1:{port}: ")
    assert "s3cret" not in message
    with pytest.raises(DatabaseUnavailable):  # and again: nothing half-open was kept
        app.enqueue("k", {})


async def test_the_async_api_says_the_same() -> None:
    app = tickwork.App(f"postgresql://127.0.0.1:{_closed_port()}/app?connect_timeout=2")
    with pytest.raises(DatabaseUnavailable, match="cannot connect to the database at"):
        await app.enqueue_async("k", {})
