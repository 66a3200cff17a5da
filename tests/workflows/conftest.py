"""The console fixtures of tests/admin, for the run graph's page tests."""

from tests.admin.conftest import admin_settings, client, console

__all__ = ["admin_settings", "client", "console"]
