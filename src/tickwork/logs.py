"""Structured logging: a message plus stable keys (action, job_id, kind, schedule, worker,
attempt, ...), printed as ``key=value`` pairs or as one JSON object per line. A record logged
with an exception carries it: in text, its traceback on the lines after (ending with the
exception's type and message); in JSON, an ``exception`` object with ``type``, ``message``
and ``traceback``.

Records logged while a worker runs carry ``worker`` (its name) without each call saying so:
the worker sets :data:`CURRENT_WORKER` for its tasks. Payloads are never logged.
"""

from __future__ import annotations

import json
import logging
import sys
from contextvars import ContextVar
from typing import Any

KEYS = (
    "action",
    "worker",
    "job_id",
    "kind",
    "queue",
    "attempt",
    "namespace",
    "schedule",
    "occurrence",
    "count",
    "reason",
    "error",
    "kubernetes_job",
)

CURRENT_WORKER: ContextVar[str | None] = ContextVar("tickwork_worker", default=None)
"""The worker whose task is logging (set by the worker for every task it starts)."""


def fields(**values: Any) -> dict[str, Any]:
    """``logger.info(msg, extra=fields(action=..., job_id=...))``"""
    unknown = set(values) - set(KEYS)
    if unknown:
        raise ValueError(f"unknown log keys: {sorted(unknown)}")
    return values


class KeyValueFormatter(logging.Formatter):
    def __init__(self, as_json: bool) -> None:
        super().__init__()
        self.as_json = as_json

    def format(self, record: logging.LogRecord) -> str:
        data = {}
        for key in KEYS:
            if hasattr(record, key):
                data[key] = getattr(record, key)
            elif key == "worker" and (worker := CURRENT_WORKER.get()) is not None:
                data[key] = worker
        trace = self.formatException(record.exc_info) if record.exc_info else None
        if self.as_json:
            data = {
                "time": self.formatTime(record),
                "level": record.levelname.lower(),
                "logger": record.name,
                "message": record.getMessage(),
                **data,
            }
            if record.exc_info and record.exc_info[1] is not None:
                exc = record.exc_info[1]
                data["exception"] = {
                    "type": _type_name(exc),
                    "message": str(exc),
                    "traceback": trace,
                }
            return json.dumps(data, default=str)
        pairs = " ".join(f"{k}={v}" for k, v in data.items())
        line = f"{self.formatTime(record)} {record.levelname:<7} {record.getMessage()}"
        line = f"{line} {pairs}" if pairs else line
        # The traceback follows on its own lines; its last line names the type and message.
        return f"{line}\n{trace}" if trace else line


def _type_name(exc: BaseException) -> str:
    kind = type(exc)
    return (
        kind.__qualname__
        if kind.__module__ == "builtins"
        else f"{kind.__module__}.{kind.__qualname__}"
    )


POOL_LOGGER = "psycopg.pool"
_POOL_OUTAGE = (
    "error connecting in ",
    "discarding closed connection",
    "discarding broken connection",
)


class PoolOutageFilter(logging.Filter):
    """psycopg_pool warns once per connection it loses or fails to open in an outage (eight
    lines for one database restart); tickwork's loops already log an outage once when it
    starts and once when it ends (:class:`tickwork.db.connections.Outage`). Those warnings are
    DEBUG records here; the pool's others (a connection returned inside a transaction, say)
    stay warnings."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.WARNING or not str(record.msg).startswith(_POOL_OUTAGE):
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger().isEnabledFor(logging.DEBUG)


def configure(level: str = "INFO", *, as_json: bool = False) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(KeyValueFormatter(as_json))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    pool = logging.getLogger(POOL_LOGGER)
    if not any(isinstance(f, PoolOutageFilter) for f in pool.filters):
        pool.addFilter(PoolOutageFilter())
