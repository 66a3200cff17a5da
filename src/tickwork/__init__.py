"""tickwork: recurring and one-off jobs on PostgreSQL, with no leader."""

from tickwork.app import App
from tickwork.model import Backoff, Job, JobId, JobStatus

__all__ = ["App", "Backoff", "Job", "JobId", "JobStatus"]
