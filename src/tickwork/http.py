"""The small HTTP server every long-running process (worker, operator, admin) serves on
``--http-port``: ``/metrics`` (Prometheus text), ``/healthz`` (the process's loops are alive)
and ``/readyz`` (the database answers and its migrations are current).

Checks are passed in: ``liveness`` is a plain function (no I/O; it looks at the process's own
state), ``readiness`` a coroutine function. Each returns ``None`` when all is well, otherwise
the reason, which becomes the 503 response's body. The probes need no login, so a reason
never carries a driver's message (it names hosts, ports and users): that goes to the log.
Answers name no library version (``Server: tickwork``).
"""

from __future__ import annotations

import asyncio
import errno
import logging
from collections.abc import Awaitable, Callable, Sequence

import prometheus_client
from aiohttp import web

from tickwork.db import migrate
from tickwork.errors import ConfigurationError, TickworkError
from tickwork.logs import fields

log = logging.getLogger(__name__)

Liveness = Callable[[], str | None]
Readiness = Callable[[], Awaitable[str | None]]

READINESS_TIMEOUT_SECONDS = 5.0
SERVER = "tickwork"
"""The ``Server`` header of every answer."""


def always_alive() -> str | None:
    return None


def database_readiness(url: str) -> Readiness:
    """A readiness check: the database answers within a few seconds and has every migration
    this version ships (a worker must not serve a half-migrated schema)."""

    async def check() -> str | None:
        try:
            states = await asyncio.wait_for(
                asyncio.to_thread(migrate.status, url), READINESS_TIMEOUT_SECONDS
            )
        except TimeoutError:
            return f"database did not answer within {READINESS_TIMEOUT_SECONDS:g}s"
        except TickworkError as exc:  # ours: a migration changed since it was applied
            return str(exc)
        except Exception:  # any error means "not ready", never a crash
            log.warning(
                "readiness: database unavailable",
                exc_info=True,
                extra=fields(action="readiness_failed"),
            )
            return "database unavailable: the reason is in the server's log"
        pending = [s.migration.name for s in states if not s.applied]
        if pending:
            return "migrations pending: " + ", ".join(pending)
        return None

    return check


def probe_routes(
    *,
    liveness: Liveness = always_alive,
    readiness: Readiness | None = None,
    registry: prometheus_client.CollectorRegistry = prometheus_client.REGISTRY,
) -> list[web.RouteDef]:
    """The three routes, for :class:`ProbeServer` and for a server of its own (the admin
    console) that serves them next to its pages."""

    async def metrics(request: web.Request) -> web.Response:
        body = prometheus_client.generate_latest(registry)
        return web.Response(
            body=body, headers={"Content-Type": prometheus_client.CONTENT_TYPE_LATEST}
        )

    async def healthz(request: web.Request) -> web.Response:
        return _answer(liveness())

    async def readyz(request: web.Request) -> web.Response:
        return _answer(await readiness() if readiness else None)

    return [web.get("/metrics", metrics), web.get("/healthz", healthz), web.get("/readyz", readyz)]


@web.middleware
async def server_name(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """``Server: tickwork`` on every answer, errors included."""
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        exc.headers["Server"] = SERVER
        raise
    response.headers["Server"] = SERVER
    return response


async def listen(site: web.TCPSite, host: str, port: int, *, flag: str = "--http-port") -> None:
    """Start ``site``; a port that cannot be bound is one ConfigurationError naming its
    ``flag``."""
    try:
        await site.start()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigurationError(f"{flag}: cannot listen on {host}:{port}: {reason}") from None


async def listen_first_free(
    runner: web.BaseRunner,
    host: str,
    port: int,
    fallbacks: Sequence[int] = (),
    *,
    flag: str = "--http-port",
) -> int:
    """Serve ``runner`` on ``host:port`` or, while that port is in use, on the first free one
    of ``fallbacks``; returns the port listened on (for port 0, the one the system chose). A
    port that cannot be bound is one ConfigurationError naming its ``flag``."""
    candidates = (port, *fallbacks)
    for tried, candidate in enumerate(candidates, 1):
        site = web.TCPSite(runner, host, candidate)
        try:
            await site.start()
        except OSError as exc:
            await site.stop()
            if exc.errno == errno.EADDRINUSE and tried < len(candidates):
                continue
            reason = exc.strerror or str(exc)
            others = f" nor on {fallbacks[0]}-{fallbacks[-1]}" if fallbacks else ""
            raise ConfigurationError(
                f"{flag}: cannot listen on {host}:{port}{others}: {reason}"
            ) from None
        return _bound_port(site)
    raise AssertionError("unreachable: the last candidate returns or raises")


def _bound_port(site: web.TCPSite) -> int:
    server = site._server
    assert isinstance(server, asyncio.base_events.Server)
    return int(server.sockets[0].getsockname()[1])


class ProbeServer:
    """Serve ``/metrics``, ``/healthz`` and ``/readyz`` on ``host:port`` (port 0 picks a free
    one; with ``fallbacks``, a port in use moves to the first free one of them; :attr:`port`
    tells which after :meth:`start`, :attr:`requested` the one asked for)."""

    def __init__(
        self,
        port: int,
        *,
        host: str = "0.0.0.0",
        fallbacks: Sequence[int] = (),
        liveness: Liveness = always_alive,
        readiness: Readiness | None = None,
        registry: prometheus_client.CollectorRegistry = prometheus_client.REGISTRY,
    ) -> None:
        self.host = host
        self.port = port
        self.requested = port
        self._fallbacks = tuple(fallbacks)
        self._routes = probe_routes(liveness=liveness, readiness=readiness, registry=registry)
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application(middlewares=[server_name])
        app.add_routes(self._routes)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        self.port = await listen_first_free(self._runner, self.host, self.port, self._fallbacks)

    @property
    def moved(self) -> str:
        """`` (9090 in use)`` when it listens elsewhere than asked (its port was in use), for
        the start line; else empty."""
        return (
            f" ({self.requested} in use)" if self.requested and self.port != self.requested else ""
        )

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


def _answer(problem: str | None) -> web.Response:
    if problem is None:
        return web.Response(text="ok\n")
    return web.Response(status=503, text=problem + "\n")
