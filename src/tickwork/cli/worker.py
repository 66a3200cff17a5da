"""``tickwork worker``: serve an App's tasks until SIGTERM or SIGINT.

Every field of :class:`tickwork.settings.WorkerSettings` is a flag (``lease_seconds`` →
``--lease-seconds``) and a variable (``TICKWORK_LEASE_SECONDS``); ``--help`` shows each one's
documentation, default and variable (docs/settings.md tabulates them). The first signal
stops gracefully (no new claims, claimed jobs that have not started handed back, running ones
given ``--shutdown-grace-seconds``, then interrupted and handed back without spending an
attempt, except container jobs, handed back at once: their Jobs run on); a second one hands
back what the worker holds and removes its row (a few seconds at most) and exits.

Unless ``--http-port 0``, the worker serves ``/metrics``, ``/healthz`` (its loops are alive)
and ``/readyz`` (its database answers and is fully migrated) on ``--http-host:--http-port``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import logging
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from tickwork.app import App
from tickwork.cli import common
from tickwork.clock import cancel_all
from tickwork.errors import ConfigurationError
from tickwork.http import ProbeServer, database_readiness
from tickwork.logs import fields
from tickwork.settings import WorkerSettings, add_arguments
from tickwork.worker.runner import Worker

log = logging.getLogger(__name__)

# After a graceful stop, how long finished task threads get to wind down before a thread
# still running (a sync task ignoring the grace period) is abandoned by os._exit.
THREAD_EXIT_SECONDS = 1.0


def register(subcommands: common.Subcommands) -> None:
    parser = subcommands.add_parser(
        "worker",
        help="run jobs (and fire schedules) of an App",
        description="Claim and run jobs of the App's tasks until SIGTERM/SIGINT. Flags win "
        "over TICKWORK_* variables, which win over defaults.",
    )
    add_arguments(parser, WorkerSettings)
    common.add_logging(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, env: common.Env) -> int:
    settings = common.load(WorkerSettings, args, env)
    common.configure_logging(args, env)
    app = load_app(settings.app)
    # Imported here, not at the top: the Kubernetes client takes about 0.3 s to import, which
    # every command would pay (the parser imports each command's module).
    from tickwork import containers

    client = containers.connect() if settings.container_jobs else None
    if client is not None:
        containers.register(app, client)
    if not app.registry.kinds:
        log.warning("the app registers no tasks: this worker runs no jobs")
    app.configure(settings.database_url)
    common.check_connection(
        settings.database_url, common.source(WorkerSettings, "database_url", args, env)
    )
    worker = Worker(app, settings)
    if client is not None:  # deletes the Jobs that outlived their job (docs/containers.md)
        worker.maintenance.services.append(containers.reconciler(client, settings))
    settle_garbage_collector()
    asyncio.run(
        serve(worker, http_fallbacks=common.port_fallbacks(WorkerSettings, "http_port", args, env))
    )
    return exit_abandoning_threads(1 if worker.failed else 0)


YOUNG_COLLECTION_THRESHOLD = 50_000
"""Objects allocated (net of those freed) between two collections of the youngest generation;
Python's default is 700."""


def settle_garbage_collector() -> None:
    """Put what start-up made (modules, the app, its settings: ~93,000 objects) out of the
    garbage collector's reach, so that a full collection walks only what the worker makes as
    it runs, and collect the youngest generation every 50,000 allocations instead of 700.
    Without the first, a worker draining no-op jobs stopped 36-60 ms for each full collection
    (bench/peers.py). Without the second, it collected the youngest generation about 370
    times per 100,000 no-op jobs drained (the middle one about 33 times), 0.13-0.18 s of its
    CPU, 1.3-1.8 µs a job; with it, a few times (a claim's jobs, their rows and completions
    are mostly freed by their reference counts: the collector only finds cycles, and waiting
    for more of them left the worker's peak RSS at 79 MB)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *gc.get_threshold()[1:])


def load_app(spec: str) -> App:
    """The App named ``MODULE:ATTRIBUTE``. The current directory is searched too, after
    PYTHONPATH and the installed packages, so ``--app tasks:app`` finds ``./tasks.py``."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ConfigurationError(f"--app: expected MODULE:APP, got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name + ".").startswith(exc.name + "."):
            raise ConfigurationError(
                f"--app: no module named {exc.name!r} (is its directory on PYTHONPATH?)"
            ) from None
        raise ConfigurationError(f"--app: importing {module_name} failed: {_brief(exc)}") from None
    except Exception as exc:
        raise ConfigurationError(f"--app: importing {module_name} failed: {_brief(exc)}") from None
    app = getattr(module, attribute, None)
    if app is None:
        raise ConfigurationError(f"--app: module {module_name} has no attribute {attribute!r}")
    if not isinstance(app, App):
        raise ConfigurationError(f"--app: {spec} is a {type(app).__name__}, not a tickwork.App")
    return app


def _brief(exc: BaseException) -> str:
    """The exception and where it was raised, on one line."""
    text = f"{type(exc).__name__}: {exc}"
    frames = traceback.extract_tb(exc.__traceback__)
    if frames and not isinstance(exc, SyntaxError):
        text += f" (at {frames[-1].filename}:{frames[-1].lineno})"
    return " ".join(text.split())


async def serve(
    worker: Worker,
    *companions: Coroutine[Any, Any, None],
    before_forced_exit: Callable[[], None] | None = None,
    http_fallbacks: Sequence[int] = (),
) -> None:
    """Run ``worker`` (and ``companions``, cancelled when it stops) until a signal; then
    close the App's connection pools. The worker's HTTP port is served meanwhile (unless its
    ``http_port`` is 0; when it is in use, on the first free one of ``http_fallbacks``); a
    port that cannot be bound fails before the worker starts.

    The first SIGTERM/SIGINT stops the worker gracefully; a second one calls
    ``before_forced_exit``, lets the worker hand back its jobs (:meth:`Worker.abandon`) and
    exits. A companion that fails stops the worker, and
    its error is raised once the worker has stopped.
    """
    probes = await start_probes(worker, http_fallbacks)
    loop = asyncio.get_running_loop()
    received: list[int] = []

    def on_signal(signum: int) -> None:
        received.append(signum)
        name = signal.Signals(signum).name
        if len(received) == 1:
            running = worker.running_jobs
            waiting = (
                f"waiting up to {worker.settings.shutdown_grace_seconds:g}s for {running} "
                f"running job{'' if running == 1 else 's'} to finish"
                if running
                else "no job is running"
            )
            log.warning(
                "%s: stopping gracefully: %s (send it again to exit at once)",
                name,
                waiting,
                extra=fields(action="shutdown_requested", worker=worker.name),
            )
            worker.stop()
            return
        log.warning(
            "second signal (%s): exiting now; running jobs are handed back as interrupted",
            name,
            extra=fields(action="forced_exit"),
        )
        if before_forced_exit is not None:
            before_forced_exit()
        worker.abandon()
        _exit_now(128 + signum)

    signals = (signal.SIGTERM, signal.SIGINT)
    for signum in signals:
        loop.add_signal_handler(signum, on_signal, signum)

    def stop_on_failure(task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            worker.stop()

    tasks = [asyncio.create_task(companion) for companion in companions]
    for task in tasks:
        task.add_done_callback(stop_on_failure)
    try:
        await worker.run()
    finally:
        await cancel_all(tasks)
        results = await asyncio.gather(*tasks, return_exceptions=True)
        if probes is not None:
            await probes.stop()
        await worker.app.close_async()
        for signum in signals:
            loop.remove_signal_handler(signum)
    for result in results:
        if isinstance(result, Exception):
            raise result


async def start_probes(worker: Worker, fallbacks: Sequence[int] = ()) -> ProbeServer | None:
    """The worker's ``/metrics``, ``/healthz`` and ``/readyz``, listening (on the first free
    one of ``fallbacks`` when its port is in use); None when off."""
    settings = worker.settings
    if not settings.http_port:
        return None
    server = ProbeServer(
        settings.http_port,
        host=settings.http_host,
        fallbacks=fallbacks,
        liveness=worker.liveness,
        readiness=database_readiness(settings.database_url),
    )
    await server.start()  # a port that cannot be bound: one ConfigurationError
    log.info(
        "metrics on http://%s:%d/metrics, with /healthz and /readyz%s",
        settings.http_host,
        server.port,
        server.moved,
        extra=fields(action="http_started", worker=worker.name),
    )
    return server


def exit_abandoning_threads(status: int) -> int:
    """Return ``status``, or exit with it at once when a task thread is still running (a sync
    task that outlived the grace period would otherwise keep the process alive)."""
    deadline = time.monotonic() + THREAD_EXIT_SECONDS
    for thread in threading.enumerate():
        if thread is threading.current_thread() or thread.daemon:
            continue
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            log.warning(
                "a task is still running after shutdown; exiting without it",
                extra=fields(action="threads_abandoned"),
            )
            _exit_now(status)
    return status


def _exit_now(status: int) -> None:
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
