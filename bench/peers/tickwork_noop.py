"""tickwork's side of bench/peers.py: the App its ``tickwork worker`` processes serve
(``--app tickwork_noop:app``, run from this directory), one no-op task."""

from __future__ import annotations

import tickwork

KIND = "bench.noop"

app = tickwork.App()


@app.task(KIND)
async def noop(job: tickwork.Job) -> None:
    return None
