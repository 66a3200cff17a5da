"""Fixtures of the admin tests: a console on the test's database and clock, served by
aiohttp's test server on this test's event loop."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp.test_utils import TestClient, TestServer

import tickwork
from tests.admin import admin_helpers
from tickwork.admin import server
from tickwork.admin.console import Console
from tickwork.admin.settings import AdminSettings


@pytest.fixture
def admin_settings() -> AdminSettings:
    return AdminSettings(port=0)


@pytest.fixture
def console(app: tickwork.App, admin_settings: AdminSettings) -> Console:
    return Console(app, admin_settings, admin_helpers.credentials())


@pytest.fixture
async def client(console: Console) -> AsyncIterator[TestClient]:
    async with TestClient(TestServer(server.build(console))) as test_client:
        yield test_client
