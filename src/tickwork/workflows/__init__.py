"""Small workflows (docs/workflows.md): jobs that wait for other jobs, all in PostgreSQL and
run by the same claim. :mod:`.after` enqueues a job with ``after=[ids]``; :mod:`.graph`
checks a small graph of named steps (a task's :meth:`~tickwork.model.Job` spawn, a Schedule's
``spec.steps``) and orders it. Releasing and cancelling dependents when their parents end is
the database's: the trigger ``jobs_ended`` (migrations 0027, 0028)."""
