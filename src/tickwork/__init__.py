"""tickwork: recurring and one-off jobs on PostgreSQL, with no leader."""

from tickwork.app import App
from tickwork.model import Backoff, Job, JobId, JobStatus, Spawn
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.options import ConcurrencyPolicy, IntervalMode, JobTemplate, MisfirePolicy

__version__ = "0.2.0.dev0"
"""This release's version, as in pyproject.toml (a test checks they agree): what
``tickwork --version`` prints, even from a checkout whose installed metadata is older."""

__all__ = [
    "App",
    "Backoff",
    "ConcurrencyPolicy",
    "IntervalMode",
    "Job",
    "JobId",
    "JobStatus",
    "JobTemplate",
    "MisfirePolicy",
    "ScheduleDefinition",
    "Spawn",
]
