"""Flow control: what holds jobs back fleet-wide, enforced in PostgreSQL. The pause of a queue
or of a schedule namespace (:mod:`tickwork.flow.pauses`, pure rules; :mod:`tickwork.flow.pausing`,
the audited actions), and the concurrency and rate limits of queues, kinds and schedule
namespaces (:mod:`tickwork.flow.limits`, pure; :mod:`tickwork.flow.limiting`, the audited
actions; :mod:`tickwork.flow.task_rules`, the kind rules tasks declare). The claims that honour
these rules are SQL (``job_claim_rules``, ``job_claim``, ``schedule_claim_due``); this package
sits above the database layer and below the App, the worker and the console."""
