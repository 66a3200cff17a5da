"""Typed settings of every command, declared once as frozen dataclasses (a docstring-like
``doc`` and a group per field) and built by one loader from flags and ``TICKWORK_*``
environment variables (flags win). Pure: no database, no Kubernetes.

``tickwork.settings.worker``, ``.shared`` hold the worker's and the shared settings; the
operator's and the console's are next to them (:mod:`tickwork.operator.config`,
:mod:`tickwork.admin.settings`). :func:`load` builds any of them, :func:`add_arguments` makes
their flags, and docs/settings.md tabulates them all.
"""

from tickwork.settings import table
from tickwork.settings.arguments import add_arguments, default_text, flag_values
from tickwork.settings.fields import env_name, flag_name, label, setting
from tickwork.settings.loader import load, origin
from tickwork.settings.shared import DatabaseSettings, LogSettings, QuietLogSettings
from tickwork.settings.worker import POOLERS, WorkerSettings, default_worker_name

__all__ = [
    "POOLERS",
    "DatabaseSettings",
    "LogSettings",
    "QuietLogSettings",
    "WorkerSettings",
    "add_arguments",
    "default_text",
    "default_worker_name",
    "env_name",
    "flag_name",
    "flag_values",
    "label",
    "load",
    "origin",
    "setting",
    "table",
]
