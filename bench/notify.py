"""NOTIFY: the enqueue rate of many concurrent producers, each committing one job at a time.

    python bench/notify.py --producers 16 --seconds 10

PostgreSQL serializes the commits of every transaction that sent a NOTIFY behind one
cluster-wide lock, held through the commit's WAL flush, so producers that notify inside their
inserting transaction lose group commit. P producer processes (spawned) each call
``App.enqueue`` in a loop for N seconds, in three ways, alternating for R rounds:

* ``in-commit``: the insert notifies from inside its own transaction (the table's trigger), as
  every enqueue did before migration 0012 and as ``enqueue(conn=...)`` still does: here, a
  connection of the producer's own, committed after each enqueue;
* ``after-commit``: the App's default since 0012: the insert's transaction notifies nobody,
  and one notification follows its commit in a transaction of its own that does not wait for
  its flush;
* ``off``: ``App(notify=False)``: no notification at all (workers find jobs by polling).

Prints, per way, the median enqueue rate (jobs committed per second over all producers), the
notifications a LISTEN connection received per second, and the jobs committed per WAL flush
(``pg_stat_wal.wal_sync``): about 1 when commits are serialized (each waits for its own
flush), more when concurrent commits share one (group commit). On a machine short of CPU the
rate is bounded by the producers' own work, and jobs per flush is the figure that shows the
serialization. Runs on a database of its own, on a
private PostgreSQL with its default durability (fsync and synchronous_commit on: the lock
matters because commits wait for their flush), or on the server of ``--database-url``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import threading
import time
from multiprocessing.synchronize import Event
from typing import Any

import psycopg
import servers

import tickwork
from tickwork.db import migrate

KIND = "bench.noop"
WAYS = ("in-commit", "after-commit", "off")


def _produce(url: str, way: str, seconds: float, ready: Any, start: Event, done: Any) -> None:
    """Enqueue single jobs, each committed, for ``seconds`` after ``start``; put the count."""
    app = tickwork.App(url, notify=way != "off")
    own = psycopg.connect(url, prepare_threshold=None) if way == "in-commit" else None

    def enqueue(n: int) -> None:
        if own is None:
            app.enqueue(KIND, {"n": n})
        else:
            app.enqueue(KIND, {"n": n}, conn=own)
            own.commit()

    enqueue(-1)  # connected, warm
    ready.put(True)
    start.wait()
    count, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        enqueue(count)
        count += 1
    done.put(count)
    if own is not None:
        own.close()
    app.close()


class _Listener:
    """A LISTEN connection counting the notifications on tickwork_jobs, as a worker gets them."""

    def __init__(self, url: str) -> None:
        self.count = 0
        self._stop = threading.Event()
        self._conn = psycopg.connect(url, autocommit=True)
        self._conn.execute("LISTEN tickwork_jobs")
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for _ in self._conn.notifies(timeout=0.2):
                self.count += 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._conn.close()


def _wal_syncs(conn: psycopg.Connection[Any]) -> int:
    """WAL flushes (fsync or fdatasync) the server has done."""
    row = conn.execute("SELECT wal_sync FROM pg_stat_wal").fetchone()
    assert row is not None
    return int(row[0])


def run_once(url: str, way: str, producers: int, seconds: float) -> tuple[float, float, float]:
    """One round of one way: jobs/s, notifications received/s, and jobs committed per WAL
    flush (1 when every commit flushes alone: serialized; more when commits share one)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE tickwork.jobs CASCADE")
        conn.execute("CHECKPOINT")  # each round starts without the previous one's dirty pages
        syncs = _wal_syncs(conn)
    ctx = multiprocessing.get_context("spawn")
    ready, done, start = ctx.Queue(), ctx.Queue(), ctx.Event()
    processes = [
        ctx.Process(target=_produce, args=(url, way, seconds, ready, start, done))
        for _ in range(producers)
    ]
    for p in processes:
        p.start()
    for _ in processes:
        ready.get(timeout=120)
    listener = _Listener(url)
    try:
        start.set()
        jobs = sum(done.get(timeout=seconds + 120) for _ in processes)
        time.sleep(0.3)  # the last notifications reach the listener
    finally:
        listener.close()
    for p in processes:
        p.join()
    with psycopg.connect(url, autocommit=True) as conn:
        time.sleep(0.5)  # the producers' backends report their statistics as they exit
        flushes = max(1, _wal_syncs(conn) - syncs)
    return jobs / seconds, listener.count / seconds, jobs / flushes


def run(url: str, producers: int, seconds: float, rounds: int) -> dict[str, float]:
    migrate.apply(url)
    print(
        f"notify: {producers} producer processes, one job per transaction, {seconds:g} s per "
        f"way, {rounds} round(s)"
    )
    results: dict[str, list[tuple[float, float, float]]] = {way: [] for way in WAYS}
    for r in range(rounds):
        for way in WAYS:
            rate, notes, shared = run_once(url, way, producers, seconds)
            results[way].append((rate, notes, shared))
            print(
                f"  round {r + 1} {way:>12}: {rate:8,.0f} jobs/s, {notes:8,.0f} "
                f"notifications/s, {shared:5.2f} jobs per WAL flush"
            )
    medians = {way: statistics.median(r[0] for r in results[way]) for way in WAYS}
    base = medians["in-commit"]
    for way in WAYS:
        notes = statistics.median(r[1] for r in results[way])
        shared = statistics.median(r[2] for r in results[way])
        print(
            f"median {way:>12}: {medians[way]:8,.0f} jobs/s ({medians[way] / base:.2f}x "
            f"in-commit), {notes:,.0f} notifications/s received, {shared:.2f} jobs per WAL flush"
        )
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--producers", type=int, default=16, help="producer processes (16)")
    parser.add_argument("--seconds", type=float, default=10, help="seconds per way and round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the three ways (3)")
    servers.add_arguments(parser)
    args = parser.parse_args()
    with servers.database_server(args.database_url) as url:
        run(url, args.producers, args.seconds, args.rounds)


if __name__ == "__main__":
    main()
