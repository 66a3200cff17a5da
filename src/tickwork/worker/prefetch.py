"""How many jobs a worker claims ahead of its free slots (pure: no clock, no database).

A worker's slots start jobs at about ``concurrency / seconds a slot spends per job``. While a
claim is in flight (its round trip), the slots keep starting the jobs already held; to never
run dry they need about that rate * the round trip in hand, and twice that absorbs the
jitter of both. So:

    ahead = floor(2 * concurrency * claim round trip / seconds per job), at most ``most``

Fast jobs (a no-op takes microseconds, a claim milliseconds) get up to ``most`` ahead (the
worker passes twice ``--claim-batch``: a full claim in hand while the next is in flight).
Slow jobs (a second each against a claim of a few milliseconds) get none ahead: the worker
claims only for its free slots and leaves the rest to idle replicas. Before anything has been
measured, none ahead either: a worker that has not run a job yet never hoards.

:class:`Estimates` keeps the two measurements. The time per job rises quickly and falls
gradually, so a switch to slow jobs stops the prefetch once the first slow ones finish, and
a few fast jobs among slow ones do not bring it back. When the worker runs dry (a claim finds
nothing and nothing is held) the time per job is forgotten: the next burst may be of slow
jobs, and its first claim takes only what the free slots can start.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

_CLAIM_WEIGHT = 0.2
"""Weight of a new claim round trip in its moving average."""
_RISING_WEIGHT = 0.5
"""Weight of a job slower than the average time per job: slow jobs stop the prefetch soon."""
_FALLING_WEIGHT = 0.1
"""Weight of a job quicker than the average: a few quick jobs do not bring it back."""


def jobs_ahead(
    concurrency: int, seconds_per_job: float | None, claim_seconds: float | None, most: int
) -> int:
    """Jobs to hold beyond the free slots; ``None`` measurements (nothing measured yet): 0."""
    if seconds_per_job is None or claim_seconds is None or most <= 0 or concurrency <= 0:
        return 0
    if math.isnan(seconds_per_job) or math.isnan(claim_seconds):
        return 0
    if seconds_per_job <= 0:
        return most
    wanted = 2.0 * concurrency * claim_seconds / seconds_per_job
    return most if wanted >= most else max(0, int(wanted))


@dataclass
class Estimates:
    """Moving averages of a worker's claim round trip and of the time a slot spends per job
    (its task and its outcome, with whatever other slots ran while it waited)."""

    claim_seconds: float | None = None
    seconds_per_job: float | None = None

    def claimed(self, seconds: float) -> None:
        """A claim took ``seconds`` from its start to its jobs in hand."""
        seconds = max(seconds, 0.0)
        if self.claim_seconds is None:
            self.claim_seconds = seconds
        else:
            self.claim_seconds += _CLAIM_WEIGHT * (seconds - self.claim_seconds)

    def ran(self, seconds: float) -> None:
        """A slot spent ``seconds`` on one job."""
        seconds = max(seconds, 0.0)
        if self.seconds_per_job is None:
            self.seconds_per_job = seconds
        else:
            weight = _RISING_WEIGHT if seconds > self.seconds_per_job else _FALLING_WEIGHT
            self.seconds_per_job += weight * (seconds - self.seconds_per_job)

    def idle(self) -> None:
        """The worker ran dry: what its next jobs take is not known."""
        self.seconds_per_job = None

    def ahead(self, concurrency: int, most: int) -> int:
        return jobs_ahead(concurrency, self.seconds_per_job, self.claim_seconds, most)
