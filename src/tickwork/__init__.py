"""tickwork: recurring and one-off jobs on PostgreSQL, with no leader."""

from tickwork.app import App
from tickwork.model import Backoff, Job, JobId, JobStatus
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.options import ConcurrencyPolicy, IntervalMode, JobTemplate, MisfirePolicy

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
]
