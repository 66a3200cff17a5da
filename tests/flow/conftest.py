"""The flow tests' worker processes: spawned, each stopped at the end by its own pid."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.helpers import StartWorker, spawned_workers


@pytest.fixture
def start_worker(database_url: str, tmp_path: Path) -> Iterator[StartWorker]:
    yield from spawned_workers(database_url, tmp_path)
