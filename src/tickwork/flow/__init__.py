"""Flow control: what holds jobs back fleet-wide, enforced in PostgreSQL. For now the pause of
a queue or of a schedule namespace (:mod:`tickwork.flow.pauses`, pure rules;
:mod:`tickwork.flow.pausing`, the audited actions). Concurrency and rate limits are to join
it. The claims that honour these rules are SQL (``job_claim``, ``schedule_claim_due``); this
package sits above the database layer and below the App, the worker and the console."""
