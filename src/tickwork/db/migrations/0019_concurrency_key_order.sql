-- The jobs of one concurrency key start in claim order (priority, run_at, id): the claim
-- takes a key's job only when it is the key's first waiting job that the claimer could take
-- (due, of its queues and kinds), so a claimer that finds that one locked by another claimer
-- passes the key over instead of starting the next one first (a backfill's occurrences run
-- oldest first). This index finds that first job in one descent. It holds only the waiting
-- jobs that carry a key (the backfill of a Forbid, BufferOne or Replace schedule, BufferOne's
-- firing, a template's or an enqueue's concurrencyKey); jobs without one never enter it.
CREATE INDEX jobs_concurrency_key_order_idx
    ON tickwork.jobs (concurrency_key, priority DESC, run_at, id)
    WHERE status = 'available' AND concurrency_key IS NOT NULL;
