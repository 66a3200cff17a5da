"""Fixtures of the chart tests: a real ``helm`` binary (see ``tests/support/binaries.py``) and
renderings of ``helm/tickwork`` for a matrix of values, parsed into objects."""

from __future__ import annotations

import pytest

from tests.chart import chart_render
from tests.support import binaries


@pytest.fixture(scope="session")
def helm() -> chart_render.Helm:
    return chart_render.Helm(binaries.helm())


@pytest.fixture(scope="session")
def rendered(helm: chart_render.Helm) -> dict[str, chart_render.Rendering]:
    """The chart rendered with every case of the values matrix, by case."""
    return {case: helm.render(case, values) for case, values in chart_render.MATRIX.items()}


@pytest.fixture(params=sorted(chart_render.MATRIX))
def rendering(
    request: pytest.FixtureRequest, rendered: dict[str, chart_render.Rendering]
) -> chart_render.Rendering:
    """The chart rendered with one case of the values matrix."""
    return rendered[request.param]
