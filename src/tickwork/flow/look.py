"""When a worker locks the flow rules before its claim (``job_claim_rules``).

While rules limit what it serves, every claim locks them first (in the claim's transaction).
While none does, the worker claims with the one statement alone and looks again every
:data:`LOOK_SECONDS`: meanwhile a rule set since gives that claim no room in its group (the
claim reads the rules itself), so a new limit is never exceeded; it may only hold the group's
jobs on this worker for that long.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

LOOK_SECONDS = 1.0


class RuleLook:
    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._applying = False
        self._looked_at = -math.inf

    def due(self) -> bool:
        """Whether the next claim locks the rules first."""
        return self._applying or self._monotonic() - self._looked_at >= LOOK_SECONDS

    def looked(self, applying: int) -> None:
        """The rules locked found ``applying`` rules on what this worker serves."""
        self._applying = applying > 0
        self._looked_at = self._monotonic()
