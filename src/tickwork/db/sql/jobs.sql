-- Every statement that reads or writes tickwork.jobs, so the job table's access paths can be
-- checked against its indexes and locks in one file. Statements whose subject is another
-- table but that read jobs keep that table's prefix and are mapped by that table's module
-- (db/schedules.py, db/workers.py) or by the console's read models (db/admin.py); the KEDA
-- scaler's count is the function tickwork.keda_due_work (migration 0008). Each block
-- starts with "-- name: <name>" and is loaded by tickwork.db.queries. Times come in as
-- %(now)s: NULL means the database clock (production); tests pass a fixed instant.

-- name: job_insert
-- One job; with a unique key, an open job of the same kind and key is returned instead.
WITH inserted AS (
    INSERT INTO tickwork.jobs (
        kind, queue, payload, priority, run_at, max_attempts,
        retry_base_seconds, retry_rate, retry_max_seconds, timeout_seconds,
        concurrency_key, concurrency_limit, unique_key, schedule_namespace, schedule_name,
        occurrence_at, trace_context)
    VALUES (
        %(kind)s, %(queue)s, %(payload)s, %(priority)s,
        coalesce(%(run_at)s, %(now)s, now()), %(max_attempts)s,
        %(retry_base)s, %(retry_rate)s, %(retry_max)s, %(timeout)s,
        %(concurrency_key)s, %(concurrency_limit)s, %(unique_key)s, NULL, NULL, NULL,
        %(trace_context)s)
    ON CONFLICT (kind, unique_key)
        WHERE unique_key IS NOT NULL AND status IN ('available', 'running')
        DO NOTHING
    RETURNING id
)
SELECT id, true AS created FROM inserted
UNION ALL
SELECT id, false FROM tickwork.jobs
WHERE %(unique_key)s::text IS NOT NULL
  AND kind = %(kind)s AND unique_key = %(unique_key)s
  AND status IN ('available', 'running')
LIMIT 1;

-- name: job_insert_many
-- Many jobs of one kind in one statement, ids returned in payload order.
INSERT INTO tickwork.jobs (
    kind, queue, payload, priority, run_at, max_attempts,
    retry_base_seconds, retry_rate, retry_max_seconds, timeout_seconds, concurrency_key,
    concurrency_limit, trace_context)
SELECT %(kind)s, %(queue)s, p.payload, %(priority)s,
       coalesce(%(run_at)s, %(now)s, now()), %(max_attempts)s,
       %(retry_base)s, %(retry_rate)s, %(retry_max)s, %(timeout)s, %(concurrency_key)s,
       %(concurrency_limit)s, %(trace_context)s::jsonb
FROM unnest(%(payloads)s::jsonb[]) WITH ORDINALITY AS p(payload, n)
ORDER BY p.n
RETURNING id;

-- name: job_inserts_quiet
-- The inserts of this transaction send no notification (trigger jobs_notify_inserted, see
-- migration 0012): the App notifies after the commit instead, with job_notify_queue.
SELECT set_config('tickwork.notify_jobs', 'off', true) AS notify_jobs;

-- name: job_notify_queue
-- Wake the workers of a queue after the commit of a job due now (none for a job due later:
-- its run_at, like the trigger, is compared with the database clock), in a transaction of
-- its own that writes nothing else. PostgreSQL does not wait for the WAL flush of a
-- transaction whose only record is its commit (RecordTransactionCommit), so this one holds
-- the NOTIFY lock for an instant, not for a flush.
SELECT pg_notify('tickwork_jobs', %(queue)s) AS notified
WHERE coalesce(%(run_at)s::timestamptz, %(now)s::timestamptz, now()) <= now();

-- name: job_insert_for_schedules
-- The jobs of schedule occurrences (occurrence_at NULL: a manual trigger), all created in
-- one trace context (the firing pass's span, or the caller's), their ids in the order given
-- (a backfill's occurrence order, which the claim follows among equal run_at). An occurrence
-- that already has a job is left alone; the rows returned are the jobs created.
INSERT INTO tickwork.jobs (
    kind, queue, payload, priority, run_at, max_attempts,
    retry_base_seconds, retry_rate, retry_max_seconds, timeout_seconds, concurrency_key,
    concurrency_limit, schedule_namespace, schedule_name, occurrence_at, trace_context)
SELECT u.kind, u.queue, u.payload, u.priority, coalesce(u.run_at, %(now)s, now()),
       u.max_attempts, u.retry_base, u.retry_rate, u.retry_max, u.timeout, u.concurrency_key,
       u.concurrency_limit, u.namespace, u.name, u.occurrence_at, %(trace_context)b::jsonb
FROM unnest(%(kinds)b::text[], %(queues)b::text[], %(payloads)b::jsonb[],
            %(priorities)b::smallint[], %(run_ats)b::timestamptz[], %(max_attempts)b::integer[],
            %(retry_bases)b::double precision[], %(retry_rates)b::double precision[],
            %(retry_maxes)b::double precision[], %(timeouts)b::double precision[],
            %(concurrency_keys)b::text[], %(concurrency_limits)b::integer[],
            %(namespaces)b::text[], %(names)b::text[],
            %(occurrences)b::timestamptz[]) WITH ORDINALITY
     AS u(kind, queue, payload, priority, run_at, max_attempts, retry_base, retry_rate,
          retry_max, timeout, concurrency_key, concurrency_limit, namespace, name,
          occurrence_at, place)
ORDER BY u.place
ON CONFLICT (schedule_namespace, schedule_name, occurrence_at)
    WHERE occurrence_at IS NOT NULL
    DO NOTHING
RETURNING id, schedule_namespace, schedule_name, occurrence_at;

-- name: job_claim_rules
-- Before job_claim, in its transaction (docs/flow-control.md): lock the flow rules that limit
-- what the claim serves (try, never wait: a rule another claimer holds is left to it), drop
-- their starts older than a period, and tell the claim which rules this transaction holds
-- (the setting tickwork.claim_rules, until the commit). The claim that follows counts each
-- held rule's running jobs and starts in a snapshot taken after the lock, so it sees what the
-- previous holder committed: two claimers never both take a rule's last room. Returns how
-- many rules apply (0: the worker may claim without this statement for a while), and in how
-- many seconds the first rate without room has room again (NULL: none is spent), and how
-- many rules another claimer held (their room is this claim's again a moment later): for a
-- worker that found nothing to sleep no longer.
WITH applying AS MATERIALIZED (
    SELECT r.id, r.rate IS NOT NULL AS rated, r.period_seconds
    FROM tickwork.flow_rules r
    WHERE (r.max_running IS NOT NULL OR r.rate IS NOT NULL)
      AND (r.scope = 'namespace'
           OR (r.scope = 'queue' AND r.name = ANY(%(queues)s::text[]))
           OR (r.scope = 'kind' AND r.name = ANY(%(kinds)s::text[])))
    ORDER BY r.id
),
locked AS MATERIALIZED (
    SELECT id, rated, period_seconds FROM applying
    WHERE pg_try_advisory_xact_lock(1952672875, id::integer)  -- 1952672875: 'tick', the rules' class
),
pruned AS (
    DELETE FROM tickwork.flow_starts s
    USING locked l
    WHERE s.rule_id = l.id AND l.rated
      AND s.started_at <= coalesce(%(now)s, now()) - make_interval(secs => l.period_seconds)
),
spent AS (  -- the locked rates (not keyed) with no room: when their oldest start leaves
    SELECT min(s.started_at) + make_interval(secs => l.period_seconds) AS room_at
    FROM locked l
    JOIN tickwork.flow_rules r ON r.id = l.id AND r.rate_key IS NULL
    JOIN tickwork.flow_starts s ON s.rule_id = l.id
    WHERE l.rated
      AND s.started_at > coalesce(%(now)s, now()) - make_interval(secs => l.period_seconds)
    GROUP BY l.id, l.period_seconds, r.rate
    HAVING sum(s.starts) >= r.rate
)
SELECT (SELECT count(*) FROM applying) AS applying,
       (SELECT count(*) FROM applying) - (SELECT count(*) FROM locked) AS contended,
       set_config('tickwork.claim_rules',
                  coalesce((SELECT string_agg(id::text, ',') FROM locked), ''), true) AS held,
       extract(epoch FROM (SELECT min(room_at) FROM spent) - coalesce(%(now)s, now()))::float8
           AS room_in_seconds;

-- name: job_claim
-- Claim up to %(limit)s due jobs of the given kinds and queues in one statement. A job
-- enqueued without max_attempts takes the claiming worker's task setting for its kind.
--
-- Flow control (docs/flow-control.md). A paused queue (tickwork.pauses, migration 0020) is
-- left out of the queues served, read in this statement. A flow rule (tickwork.flow_rules,
-- migration 0021) limits the jobs of a queue, kind or schedule namespace: the rules that
-- job_claim_rules locked in this transaction have the room their running jobs and recent
-- starts leave; the others none (a claim made without job_claim_rules leaves every limited
-- group alone). A group with no room is left out of the scans like a paused queue, and so
-- are the jobs of a keyed rate's spent keys, so they hold back no other group's or key's;
-- of the jobs locked, each rule takes at most its room, in claim order (per value of a keyed
-- rate's payload field), and the rate rules record their starts. A concurrency key lets concurrency_limit of its jobs run (NULL: 1): keys at their
-- limit are passed over inside the scan; of the rest, at most the room per key, each job
-- given a free slot; a key of limit 1 only for its first due job this claimer could take (so
-- a backfill's occurrences start oldest first). The advisory lock keeps two claimers from
-- taking the same key at once, and the unique index jobs_concurrency_slot_idx is the final
-- guard.
--
-- Claim order: the jobs of a priority above 0 first (an ordered scan of jobs_claim_idx),
-- then those of priority 0 (the usual one) shared fairly between tenants (the schedule
-- namespaces, and '' for the jobs enqueued from code): the tenants with waiting jobs of the
-- kinds served are found by skipping through jobs_tenant_kind_idx (migration 0029), one
-- descent each per queue and kind, so the waiting jobs of other kinds (another pool's kinds in
-- the same queue, fired jobs no worker of this pool runs) are never read; each tenant gets a
-- share of the batch in proportion to its weight (the remainder drawn at random, weighted),
-- its oldest jobs of the kinds served, from its ranges of that index; what the shares leave is
-- filled in run_at order by the scan of jobs_claim_idx, made only when a tenant had no share
-- or one of its ranges gave all it was asked (else that scan could find nothing the shares did
-- not, and would read the other kinds' jobs looking). Every scan starts at the lowest claim
-- floor of the queues and kinds served (migration 0013; -infinity when one of them has no
-- valid floor), so entries a held-open snapshot keeps below it are passed over on the index
-- alone.
-- The chosen jobs are updated where their lock found them (ctid: a locked row cannot move;
-- one page read instead of a primary key descent: 4.2 ms instead of 4.5 for 470 jobs).
-- The payload comes as JSON text (payload_json, as in every query a Job is read from): the
-- driver's jsonb loader took 3 µs a job, json.loads of the text 0.4 (bench/peers.py).
WITH RECURSIVE
rules AS MATERIALIZED (  -- the limits on what this claim serves; locked: by job_claim_rules
    SELECT r.id, r.scope, r.name, r.max_running, r.rate, r.period_seconds, r.rate_key,
           r.id = ANY(coalesce(string_to_array(
               nullif(current_setting('tickwork.claim_rules', true), ''), ',')::bigint[], '{}'))
               AS locked
    FROM tickwork.flow_rules r
    WHERE (r.max_running IS NOT NULL OR r.rate IS NOT NULL)
      AND (r.scope = 'namespace'
           OR (r.scope = 'queue' AND r.name = ANY(%(queues)s::text[]))
           OR (r.scope = 'kind' AND r.name = ANY(%(kinds)s::text[])))
),
running AS MATERIALIZED (  -- each locked concurrency rule's running jobs
    SELECT r.id AS rule_id, count(j.id) AS n
    FROM rules r
    LEFT JOIN tickwork.jobs j
           ON j.status = 'running'
          AND r.name = CASE r.scope WHEN 'queue' THEN j.queue WHEN 'kind' THEN j.kind
                                    ELSE j.schedule_namespace END
    WHERE r.locked AND r.max_running IS NOT NULL
    GROUP BY r.id
),
recent AS MATERIALIZED (  -- each locked rate rule's starts in the last period, per key
    SELECT s.rule_id, s.key, sum(s.starts) AS n
    FROM rules r
    JOIN tickwork.flow_starts s ON s.rule_id = r.id
    WHERE r.locked AND r.rate IS NOT NULL
      AND s.started_at > coalesce(%(now)s, now()) - make_interval(secs => r.period_seconds)
    GROUP BY s.rule_id, s.key
),
room AS MATERIALIZED (  -- what each rule lets start now (rate: for the key '', or a fresh key)
    SELECT r.id, r.scope, r.name, r.rate, r.rate_key, r.locked,
           CASE WHEN r.max_running IS NULL THEN NULL
                WHEN NOT r.locked THEN 0
                ELSE greatest(0, r.max_running - coalesce(
                    (SELECT n FROM running WHERE rule_id = r.id), 0)) END AS running_room,
           CASE WHEN r.rate IS NULL THEN NULL
                WHEN NOT r.locked THEN 0
                WHEN r.rate_key IS NOT NULL THEN r.rate
                ELSE greatest(0, r.rate - coalesce(
                    (SELECT n FROM recent WHERE rule_id = r.id AND key = ''), 0)) END AS rate_room
    FROM rules r
),
spent AS MATERIALIZED (  -- the keys of keyed rates with no room (and whether there are any)
    SELECT r.id, r.scope, r.name, r.rate_key, k.key
    FROM room r
    JOIN recent k ON k.rule_id = r.id
    WHERE r.rate_key IS NOT NULL AND r.locked AND k.n >= r.rate
),
shut AS MATERIALIZED (  -- the queues, kinds and namespaces with no room at all
    SELECT coalesce(array_agg(name) FILTER (WHERE scope = 'queue'), '{}') AS queues,
           coalesce(array_agg(name) FILTER (WHERE scope = 'kind'), '{}') AS kinds,
           coalesce(array_agg(name) FILTER (WHERE scope = 'namespace'), '{}') AS namespaces
    FROM room
    WHERE running_room = 0 OR rate_room = 0
),
served AS MATERIALIZED (  -- the queues and kinds served, less the paused and shut ones
    SELECT coalesce((SELECT array_agg(q.queue) FROM unnest(%(queues)s::text[]) AS q(queue)
                     WHERE q.queue <> ALL((SELECT queues FROM shut)::text[])
                       AND NOT EXISTS (SELECT FROM tickwork.pauses p
                                       WHERE p.scope = 'queue' AND p.name = q.queue)),
                    '{}') AS queues,
           coalesce((SELECT array_agg(k.kind) FROM unnest(%(kinds)s::text[]) AS k(kind)
                     WHERE k.kind <> ALL((SELECT kinds FROM shut)::text[])), '{}') AS kinds,
           (SELECT namespaces FROM shut) AS shut_namespaces
),
busy AS MATERIALIZED (  -- the keys with running jobs: how many, their limit and slots
    SELECT concurrency_key, count(*) AS n, min(coalesce(concurrency_limit, 1)) AS lim,
           array_agg(coalesce(concurrency_slot, 0)) AS slots
    FROM tickwork.jobs
    WHERE status = 'running' AND concurrency_key IS NOT NULL
    GROUP BY concurrency_key
),
full_keys AS MATERIALIZED (
    SELECT concurrency_key FROM busy WHERE n >= lim
),
floor AS MATERIALIZED (
    SELECT CASE WHEN count(*) > 0 AND count(f.floor) = count(*) THEN min(f.floor)
                ELSE '-infinity'::timestamptz END AS run_at
    FROM unnest((SELECT queues FROM served)) AS q(queue)
    CROSS JOIN unnest((SELECT kinds FROM served)) AS k(kind)
    LEFT JOIN tickwork.claim_floors f
           ON f.queue = q.queue AND f.kind = k.kind
          AND f.valid_until > coalesce(%(now)s, now())
),
urgent AS MATERIALIZED (
    SELECT id, ctid AS row_id, priority, run_at, concurrency_key, concurrency_limit,
           queue, kind, schedule_namespace
    FROM tickwork.jobs
    WHERE (SELECT cardinality(queues) * cardinality(kinds) FROM served) > 0  -- else no scan
      AND status = 'available'
      AND priority > 0
      AND run_at <= coalesce(%(now)s, now())
      AND run_at >= (SELECT run_at FROM floor)
      AND queue = ANY((SELECT queues FROM served)::text[])
      AND kind = ANY((SELECT kinds FROM served)::text[])
      AND (schedule_namespace IS NULL
           OR schedule_namespace <> ALL((SELECT shut_namespaces FROM served)::text[]))
      AND (concurrency_key IS NULL OR concurrency_key NOT IN (SELECT concurrency_key FROM full_keys))
      AND (NOT EXISTS (SELECT FROM spent) OR (  -- a spent key's jobs are passed over
          SELECT count(*) FROM spent k
          WHERE k.name = CASE k.scope WHEN 'queue' THEN queue WHEN 'kind' THEN kind
                                      ELSE schedule_namespace END
            AND k.key = left(coalesce(payload ->> k.rate_key, ''), 200)) = 0)
    ORDER BY priority DESC, run_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
pairs AS MATERIALIZED (  -- the queues and kinds served, paired, as two arrays. The walk
    -- below starts from them unnested under a LIMIT of their number: a LIMIT the planner does
    -- not know it estimates at a tenth of its input, so one pair (the unnest: 10), the walk
    -- at 100 steps. Crossed unnests were 100 pairs, 10,000 steps: that estimate put the claim
    -- above jit_above_cost (3 s of compiling for a claim of 20 jobs once autovacuum had
    -- analysed a draining table)
    SELECT coalesce(array_agg(q.queue), '{}') AS queues, coalesce(array_agg(k.kind), '{}') AS kinds
    FROM unnest((SELECT queues FROM served)) AS q(queue)
    CROSS JOIN unnest((SELECT kinds FROM served)) AS k(kind)
),
tenants(queue, kind, tenant) AS (  -- per queue and kind served, its tenants with waiting
    -- jobs of priority 0, skipping through jobs_tenant_kind_idx (migration 0029): the jobs of
    -- other kinds are never read. "status <= 'available'" (the enum's first label) is that
    -- index's predicate, which implies neither jobs_tenant_idx's nor jobs_claim_idx's: with
    -- statistics taken before a bulk enqueue (every condition at its default selectivity,
    -- every scan estimated at one row) the planner cannot pick them, which once read the
    -- whole queue for each step of this walk (bench/peers.py).
    SELECT q.queue, q.kind,
           (SELECT coalesce(j.schedule_namespace, '') FROM tickwork.jobs j
            WHERE j.status <= 'available' AND j.priority = 0 AND j.queue = q.queue
              AND j.kind = q.kind
              AND j.run_at >= (SELECT run_at FROM floor)
            ORDER BY coalesce(j.schedule_namespace, '') LIMIT 1)
    FROM (SELECT * FROM unnest((SELECT queues FROM pairs), (SELECT kinds FROM pairs))
          LIMIT (SELECT cardinality(queues) FROM pairs)) AS q(queue, kind)  -- see pairs
    UNION ALL
    SELECT t.queue, t.kind,
           (SELECT coalesce(j.schedule_namespace, '') FROM tickwork.jobs j
            WHERE j.status <= 'available' AND j.priority = 0 AND j.queue = t.queue
              AND j.kind = t.kind
              AND coalesce(j.schedule_namespace, '') > t.tenant
              AND j.run_at >= (SELECT run_at FROM floor)
            ORDER BY coalesce(j.schedule_namespace, '') LIMIT 1)
    FROM tenants t
    WHERE t.tenant IS NOT NULL
),
weighted AS (  -- each tenant's whole share of what priority 0 may take, and its draw
    SELECT queue, tenant, kinds, weight,
           floor(taken * weight / sum(weight) OVER ())::integer AS share,
           row_number() OVER (ORDER BY -ln(1.0 - random()) / weight::float8) AS draw,
           taken
    FROM (SELECT t.queue, t.tenant, array_agg(t.kind) AS kinds,
                 coalesce(min(r.weight), 1)::numeric AS weight,
                 %(limit)s - (SELECT count(*) FROM urgent) AS taken
          FROM tenants t
          LEFT JOIN tickwork.flow_rules r ON r.scope = 'namespace' AND r.name = t.tenant
          WHERE t.tenant IS NOT NULL
            AND t.tenant <> ALL((SELECT shut_namespaces FROM served)::text[])
          GROUP BY t.queue, t.tenant) AS w
),
shares AS MATERIALIZED (  -- the remainder goes one each to the first tenants drawn
    SELECT queue, tenant, kinds,
           share + CASE WHEN draw <= taken - sum(share) OVER () THEN 1 ELSE 0 END AS share
    FROM weighted
),
portions AS MATERIALIZED (  -- each tenant's share of each kind it has waiting, oldest first,
    -- from its range of jobs_tenant_kind_idx (a tenant with several kinds waiting locks up to
    -- its share of each, and takes its oldest ones below)
    SELECT s.queue, s.tenant, s.share, cardinality(s.kinds) AS ranges, f.*
    FROM shares s
    CROSS JOIN unnest(s.kinds) AS waiting(kind)
    CROSS JOIN LATERAL (
        SELECT j.id, j.ctid AS row_id, j.priority, j.run_at, j.concurrency_key,
               j.concurrency_limit, j.kind, j.schedule_namespace
        FROM tickwork.jobs j
        WHERE j.status <= 'available'
          AND j.priority = 0
          AND j.queue = s.queue
          AND j.kind = waiting.kind
          AND coalesce(j.schedule_namespace, '') = s.tenant
          AND j.run_at <= coalesce(%(now)s, now())
          AND j.run_at >= (SELECT run_at FROM floor)
          AND (j.concurrency_key IS NULL
               OR j.concurrency_key NOT IN (SELECT concurrency_key FROM full_keys))
          AND (NOT EXISTS (SELECT FROM spent) OR (
              SELECT count(*) FROM spent k
              WHERE k.name = CASE k.scope WHEN 'queue' THEN j.queue WHEN 'kind' THEN j.kind
                                          ELSE j.schedule_namespace END
                AND k.key = left(coalesce(j.payload ->> k.rate_key, ''), 200)) = 0)
        ORDER BY j.run_at, j.id
        LIMIT s.share
        FOR UPDATE SKIP LOCKED
    ) f
    WHERE s.share > 0
    LIMIT %(limit)s * (SELECT cardinality(kinds) FROM served)  -- at most: tells the planner
),
fair AS MATERIALIZED (  -- each tenant's share: its oldest jobs of the kinds it has waiting
    SELECT id, row_id, priority, run_at, concurrency_key, concurrency_limit, queue, kind,
           schedule_namespace
    FROM portions
    WHERE ranges = 1  -- one kind waiting: its one range gave at most the share, oldest first
    UNION ALL
    SELECT id, row_id, priority, run_at, concurrency_key, concurrency_limit, queue, kind,
           schedule_namespace
    FROM (SELECT p.*, row_number() OVER (PARTITION BY p.queue, p.tenant
                                         ORDER BY p.run_at, p.id) AS place
          FROM portions p
          WHERE p.ranges > 1) AS p
    WHERE place <= share
),
usual AS MATERIALIZED (  -- what the shares left, oldest first: only when a tenant had no
    -- share, a range may hold more (it gave all it was asked) or a tenant locked more than its
    -- share; otherwise the shares took every job this scan could take, and it would only read
    -- the other kinds' jobs looking
    SELECT id, ctid AS row_id, priority, run_at, concurrency_key, concurrency_limit,
           queue, kind, schedule_namespace
    FROM tickwork.jobs
    WHERE (EXISTS (SELECT FROM shares WHERE share = 0)
           OR EXISTS (SELECT FROM portions GROUP BY queue, tenant, kind
                      HAVING count(*) >= min(share))
           OR (SELECT count(*) FROM portions) > (SELECT count(*) FROM fair))
      AND status = 'available'
      AND priority = 0
      AND run_at <= coalesce(%(now)s, now())
      AND run_at >= (SELECT run_at FROM floor)
      AND queue = ANY((SELECT queues FROM served)::text[])
      AND kind = ANY((SELECT kinds FROM served)::text[])
      AND (schedule_namespace IS NULL
           OR schedule_namespace <> ALL((SELECT shut_namespaces FROM served)::text[]))
      AND (concurrency_key IS NULL OR concurrency_key NOT IN (SELECT concurrency_key FROM full_keys))
      AND (NOT EXISTS (SELECT FROM spent) OR (  -- a spent key's jobs are passed over
          SELECT count(*) FROM spent k
          WHERE k.name = CASE k.scope WHEN 'queue' THEN queue WHEN 'kind' THEN kind
                                      ELSE schedule_namespace END
            AND k.key = left(coalesce(payload ->> k.rate_key, ''), 200)) = 0)
      AND id NOT IN (SELECT id FROM fair)
    ORDER BY priority DESC, run_at, id
    LIMIT %(limit)s - (SELECT count(*) FROM urgent) - (SELECT count(*) FROM fair)
    FOR UPDATE SKIP LOCKED
),
locked AS MATERIALIZED (
    SELECT * FROM urgent
    UNION ALL
    SELECT * FROM fair
    UNION ALL
    SELECT * FROM usual
),
checks AS MATERIALIZED (  -- each locked job against each rule with room that applies to it
    SELECT l.id, g.rule_id, g.gate, g.key,
           row_number() OVER (PARTITION BY g.rule_id, g.gate, g.key
                              ORDER BY l.priority DESC, l.run_at, l.id) <= g.room AS fits
    FROM locked l
    JOIN room r
      ON r.name = CASE r.scope WHEN 'queue' THEN l.queue WHEN 'kind' THEN l.kind
                               ELSE l.schedule_namespace END
    CROSS JOIN LATERAL (
        SELECT r.id AS rule_id, 'running' AS gate, '' AS key, r.running_room AS room
        WHERE r.running_room IS NOT NULL
        UNION ALL
        SELECT r.id, 'rate', k.key,
               CASE WHEN r.rate_key IS NULL THEN r.rate_room
                    ELSE greatest(0, r.rate - coalesce(
                        (SELECT n FROM recent WHERE rule_id = r.id AND key = k.key), 0)) END
        FROM (SELECT CASE WHEN r.rate_key IS NULL THEN ''
                          ELSE left(coalesce((SELECT x.payload ->> r.rate_key FROM tickwork.jobs x
                                              WHERE x.ctid = l.row_id), ''), 200) END AS key) k
        WHERE r.rate_room IS NOT NULL
    ) g
),
passed AS (  -- the locked jobs every rule applying to them has room for
    SELECT * FROM locked
    WHERE id NOT IN (SELECT id FROM checks WHERE NOT fits)
),
keyed AS (
    SELECT p.row_id, p.concurrency_key, p.id, coalesce(p.concurrency_limit, 1) AS lim,
           row_number() OVER (PARTITION BY p.concurrency_key
                              ORDER BY p.priority DESC, p.run_at, p.id) AS rank,
           coalesce(b.n, 0) AS n, coalesce(b.slots, '{}') AS slots
    FROM passed p
    LEFT JOIN busy b ON b.concurrency_key = p.concurrency_key
    WHERE p.concurrency_key IS NOT NULL
),
chosen AS MATERIALIZED (
    SELECT row_id, id, NULL::integer AS slot FROM passed WHERE concurrency_key IS NULL
    UNION ALL
    SELECT k.row_id, k.id,
           (SELECT s.slot FROM generate_series(0, k.lim - 1) AS s(slot)
            WHERE s.slot <> ALL(k.slots) ORDER BY s.slot OFFSET k.rank - 1 LIMIT 1)
    FROM keyed k
    WHERE k.rank <= k.lim - k.n
      AND (k.lim > 1 OR k.id = (  -- a key of limit 1: its first job this claimer could take
          SELECT e.id FROM tickwork.jobs e
          WHERE e.concurrency_key = k.concurrency_key
            AND e.status = 'available'
            AND e.run_at <= coalesce(%(now)s, now())
            AND e.queue = ANY((SELECT queues FROM served)::text[])
            AND e.kind = ANY(%(kinds)s::text[])
          ORDER BY e.priority DESC, e.run_at, e.id
          LIMIT 1))
      AND pg_try_advisory_xact_lock(hashtextextended('tickwork:' || k.concurrency_key, 0))
),
claimed AS (
    UPDATE tickwork.jobs j
    SET status = 'running',
        attempt = j.attempt + 1,
        max_attempts = coalesce(j.max_attempts, (
            SELECT task.max_attempts
            FROM unnest(%(kinds)s::text[], %(max_attempts)s::integer[]) AS task(kind, max_attempts)
            WHERE task.kind = j.kind)),
        picked_by = %(worker)s,
        picked_by_incarnation = %(incarnation)s::uuid,
        started_at = coalesce(%(now)s, now()),
        lease_expires_at = coalesce(%(now)s, now()) + make_interval(secs => %(lease_seconds)s),
        concurrency_slot = CASE WHEN j.concurrency_key IS NOT NULL  -- no lookup for the rest
                                THEN (SELECT c.slot FROM chosen c WHERE c.id = j.id) END,
        version = j.version + 1
    WHERE j.ctid = ANY(ARRAY(SELECT row_id FROM chosen))
      -- Nothing chosen: no scan at all. A worker's prepared claim keeps the generic plan made
      -- when it started, which for a table of a few pages then reads the table instead of
      -- looking the rows up by version; grown since, the claims that found nothing read it
      -- whole (3,000 buffers a claim beside 1,000,000 fired jobs it does not serve).
      AND EXISTS (SELECT FROM chosen)
    RETURNING  -- db/jobs.py's JOB_COLUMNS, in their order, as every query reading jobs
              j.id, j.kind, j.queue, j.payload::text AS payload_json, j.priority, j.run_at,
              j.attempt, j.max_attempts, j.version, j.retry_base_seconds, j.retry_rate,
              j.retry_max_seconds, j.timeout_seconds, j.concurrency_key, j.unique_key,
              j.schedule_namespace, j.schedule_name, j.occurrence_at, j.lease_expires_at,
              j.started_at, j.status::text AS status, j.picked_by, j.trace_context
),
started AS (  -- the starts the rate rules count
    INSERT INTO tickwork.flow_starts (rule_id, key, started_at, starts)
    SELECT c.rule_id, c.key, coalesce(%(now)s, now()), count(*)
    FROM checks c
    WHERE c.gate = 'rate'
      AND (c.id IN (SELECT id FROM claimed)) IS TRUE  -- a hashed subplan, not a nested loop
    GROUP BY c.rule_id, c.key
)
-- Handed over in claim order (UPDATE ... RETURNING has none): the worker starts its batch
-- highest priority first.
SELECT * FROM claimed ORDER BY priority DESC, run_at, id;

-- name: job_adopt
-- Jobs running under this worker process's incarnation that it does not hold: a claim
-- committed whose answer a cut connection lost. By incarnation, never by name: another
-- process given the same name does not take this one's jobs. Same columns as job_claim; the
-- worker runs them (versions fence it).
SELECT j.id, j.kind, j.queue, j.payload::text AS payload_json, j.priority, j.run_at,
       j.attempt, j.max_attempts, j.version, j.retry_base_seconds, j.retry_rate,
       j.retry_max_seconds, j.timeout_seconds, j.concurrency_key, j.unique_key,
       j.schedule_namespace, j.schedule_name, j.occurrence_at, j.lease_expires_at,
       j.started_at, j.status::text AS status, j.picked_by, j.trace_context
FROM tickwork.jobs j
WHERE j.picked_by_incarnation = %(incarnation)s AND j.status = 'running'
  AND j.id <> ALL(%(held)s::bigint[])
ORDER BY j.priority DESC, j.run_at, j.id;

-- name: job_extend_leases
-- Heartbeat: extend the leases of the jobs this worker process still owns (its claim's version,
-- under its incarnation), and say which of them were asked to stop. A job missing from the
-- result was recovered by another worker. Each job is found by its primary key, as
-- job_complete_many explains.
UPDATE tickwork.jobs j
SET lease_expires_at = coalesce(%(now)s, now()) + make_interval(secs => %(lease_seconds)s)
FROM unnest((SELECT %(ids)b::bigint[]), (SELECT %(versions)b::integer[])) AS owned(id, version)
WHERE j.id = owned.id AND j.version = owned.version AND j.status::text = 'running'
  AND j.picked_by_incarnation IS NOT DISTINCT FROM %(incarnation)s::uuid
RETURNING j.id, j.cancel_requested_at IS NOT NULL AS stop_requested;

-- name: job_complete_many
-- Mark jobs succeeded, fenced by version, with their return values (NULL: none, or not kept:
-- result_error says why; a schedule job's is also its schedule's carried state) and the progress
-- reported since the worker last wrote it (NULL: keep the stored one); returns the ids that
-- were updated. The trigger jobs_schedule_ended updates their schedules in the same statement.
-- Each job is found by its primary key, a nested loop over the batch: the arrays are read
-- through subqueries so that the planner does not see how many ids there are. Seeing 500,
-- it reads the whole table and hashes it while the table has fewer than ~2,000 pages per
-- batch (random_page_cost prices each lookup as a disk read): at 30,000 jobs, 7 ms a batch
-- of 500 instead of 3 (bench/peers.py). The status is compared as text so that no partial
-- index on it matches: told by statistics that few jobs run, the planner would scan every
-- entry of jobs_lease_idx (dead ones included, until a vacuum). The ids and versions are sent
-- in binary (%%(ids)b; as in every statement fenced by them): psycopg dumps a list of ints
-- as text at 1.4 µs a job (it inspects the list to choose the array's type, then quotes each
-- number), in binary at 0.4.
UPDATE tickwork.jobs j
SET status = 'succeeded',
    finished_at = coalesce(%(now)s, now()),
    lease_expires_at = NULL,
    result = done.result,
    result_error = done.result_error,
    progress = coalesce(done.progress || jsonb_build_object('at', coalesce(%(now)s, now())),
                        j.progress),
    version = j.version + 1
FROM unnest((SELECT %(ids)b::bigint[]), (SELECT %(versions)b::integer[]),
            (SELECT %(results)s::jsonb[]), (SELECT %(result_errors)s::text[]),
            (SELECT %(progress)s::jsonb[]))
     AS done(id, version, result, result_error, progress)
WHERE j.id = done.id AND j.version = done.version AND j.status::text = 'running'
RETURNING j.id;

-- name: job_retry_later
-- A failed attempt with attempts left: available again after the retry delay, or cancelled
-- when a cancellation was requested meanwhile (a job asked to stop never runs again).
UPDATE tickwork.jobs
SET status = CASE WHEN cancel_requested_at IS NULL THEN 'available'
                  ELSE 'cancelled' END::tickwork.job_status,
    run_at = CASE WHEN cancel_requested_at IS NULL
                  THEN coalesce(%(now)s, now()) + make_interval(secs => %(delay_seconds)s)
                  ELSE run_at END,
    finished_at = CASE WHEN cancel_requested_at IS NULL THEN NULL
                       ELSE coalesce(%(now)s, now()) END,
    lease_expires_at = NULL,
    last_error = %(error)s,
    version = version + 1
WHERE id = %(id)s AND version = %(version)s AND status = 'running'
RETURNING status;

-- name: job_mark_dead
-- A failed attempt with none left.
UPDATE tickwork.jobs
SET status = 'dead',
    finished_at = coalesce(%(now)s, now()),
    lease_expires_at = NULL,
    last_error = %(error)s,
    version = version + 1
WHERE id = %(id)s AND version = %(version)s AND status = 'running'
RETURNING id;

-- name: job_hand_back
-- Claimed but never started (shutdown): available again, the attempt not counted; cancelled
-- instead when a cancellation was requested. Each job is found by its primary key, as
-- job_complete_many explains.
UPDATE tickwork.jobs j
SET status = CASE WHEN j.cancel_requested_at IS NULL THEN 'available'
                  ELSE 'cancelled' END::tickwork.job_status,
    attempt = j.attempt - 1,
    picked_by = NULL,
    picked_by_incarnation = NULL,
    started_at = NULL,
    finished_at = CASE WHEN j.cancel_requested_at IS NULL THEN NULL
                       ELSE coalesce(%(now)s, now()) END,
    lease_expires_at = NULL,
    version = j.version + 1
FROM unnest((SELECT %(ids)b::bigint[]), (SELECT %(versions)b::integer[])) AS held(id, version)
WHERE j.id = held.id AND j.version = held.version AND j.status::text = 'running'
RETURNING j.id;

-- name: job_interrupted
-- A running job interrupted because its worker's shutdown grace ran out: a worker shutting down
-- is not the job failing. Available again at once, the attempt not spent, one interruption
-- counted; cancelled instead when a cancellation was requested; dead (its on_dead hook pending,
-- run by a worker registering the kind, as for lease recovery) once interrupted more than
-- %(max_interruptions)s times, so a job that always outlives the grace does not come back
-- for ever. Fenced by version; returns the job's new status.
UPDATE tickwork.jobs
SET status = CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'
                  WHEN interruptions >= %(max_interruptions)s THEN 'dead'
                  ELSE 'available' END::tickwork.job_status,
    attempt = CASE WHEN cancel_requested_at IS NULL AND interruptions < %(max_interruptions)s
                   THEN attempt - 1 ELSE attempt END,
    interruptions = interruptions + 1,
    run_at = CASE WHEN cancel_requested_at IS NULL AND interruptions < %(max_interruptions)s
                  THEN coalesce(%(now)s, now()) ELSE run_at END,
    finished_at = CASE WHEN cancel_requested_at IS NULL AND interruptions < %(max_interruptions)s
                       THEN NULL ELSE coalesce(%(now)s, now()) END,
    on_dead_pending = cancel_requested_at IS NULL AND interruptions >= %(max_interruptions)s,
    last_error = CASE
        WHEN cancel_requested_at IS NOT NULL
            THEN 'cancelled: worker ' || %(worker)s || ' shut down before the job stopped'
        WHEN interruptions >= %(max_interruptions)s
            THEN 'interrupted ' || interruptions + 1 || ' times by workers shutting down (more '
                 || 'than --max-interruptions ' || %(max_interruptions)s
                 || '): the job outlives the shutdown grace'
        ELSE 'interrupted: worker ' || %(worker)s || ' shut down before the job finished; '
             || 'handed back, attempt not spent (interruption ' || interruptions + 1 || ' of at '
             || 'most ' || %(max_interruptions)s || ')' END,
    lease_expires_at = NULL,
    version = version + 1
WHERE id = %(id)s AND version = %(version)s AND status = 'running'
RETURNING status::text AS status;

-- name: job_recover_expired
-- Leases that ran out (the worker died or hung), whatever the job's kind: cancelled when a
-- cancellation was requested; otherwise available again with attempts left (the attempt
-- counted), or dead on the last attempt with its on_dead hook pending (run later by a worker
-- that registers the kind). Divided between workers by SKIP LOCKED.
WITH expired AS (
    SELECT id,
           CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'
                WHEN attempt < max_attempts THEN 'available'
                ELSE 'dead' END::tickwork.job_status AS outcome
    FROM tickwork.jobs
    WHERE status = 'running'
      AND lease_expires_at < coalesce(%(now)s, now())
    ORDER BY lease_expires_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE tickwork.jobs j
SET status = e.outcome,
    run_at = CASE WHEN e.outcome = 'available' THEN coalesce(%(now)s, now()) ELSE j.run_at END,
    finished_at = CASE WHEN e.outcome = 'available' THEN NULL ELSE coalesce(%(now)s, now()) END,
    on_dead_pending = e.outcome = 'dead',
    last_error = CASE e.outcome
        WHEN 'cancelled' THEN 'cancelled: the lease expired before worker '
                              || coalesce(j.picked_by, '?') || ' recorded the cancellation'
        WHEN 'available' THEN 'lease expired: worker ' || coalesce(j.picked_by, '?')
                              || ' stopped heartbeating'
        ELSE 'lease expired on the last attempt: worker ' || coalesce(j.picked_by, '?')
             || ' stopped heartbeating' END,
    lease_expires_at = NULL,
    version = j.version + 1
FROM expired e
WHERE j.id = e.id
RETURNING j.id, j.queue, j.kind, j.picked_by, j.status, j.schedule_namespace;

-- name: job_lock_dead_hooks_pending
-- Dead jobs of kinds this worker registers whose on_dead hook has not run (lease recovery made
-- them dead, maybe in a worker that does not know the kind).
SELECT id, kind, queue, payload::text AS payload_json, priority, run_at, attempt,
       max_attempts, version, retry_base_seconds, retry_rate, retry_max_seconds,
       timeout_seconds, concurrency_key, unique_key, schedule_namespace, schedule_name,
       occurrence_at, lease_expires_at, started_at, status::text AS status, picked_by,
       trace_context, last_error, created_at, finished_at
FROM tickwork.jobs
WHERE on_dead_pending AND kind = ANY(%(kinds)s::text[])
ORDER BY id
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: job_dead_hook_ran
-- The on_dead hook of a dead job ran (its error, if it failed, appended to last_error).
UPDATE tickwork.jobs
SET on_dead_pending = false,
    last_error = %(error)s
WHERE id = %(id)s AND on_dead_pending
RETURNING id;

-- name: job_cancel
-- Cancel a job. An available or waiting one is cancelled at once (a waiting one's dependents
-- with it: trigger jobs_ended, migration 0028). A running one is asked to stop: it
-- stays running, holding its concurrency key, until its worker has stopped the task and
-- records the outcome, or its lease expires (then lease recovery cancels it). The trigger
-- jobs_notify_cancel_requested tells its worker; the request is not a state change and
-- leaves the version alone.
UPDATE tickwork.jobs
SET status = CASE WHEN status = 'running' THEN status
                  ELSE 'cancelled' END::tickwork.job_status,
    finished_at = CASE WHEN status <> 'running' THEN coalesce(%(now)s, now()) END,
    cancel_requested_at = CASE WHEN status = 'running'
                               THEN coalesce(cancel_requested_at, %(now)s, now()) END,
    version = CASE WHEN status <> 'running' THEN version + 1 ELSE version END
WHERE id = %(id)s AND status::text IN ('available', 'running', 'waiting')
RETURNING id;

-- name: job_cancel_of_schedules
-- Replace: cancel the open jobs of some schedules, as job_cancel does: an available one at
-- once; a running one is asked to stop and keeps its concurrency key until its worker records
-- the outcome (so a new job sharing the key cannot start alongside it). Jobs locked by
-- someone else are left alone; the caller compares counts.
WITH open AS (
    SELECT j.id
    FROM tickwork.jobs j
    JOIN unnest(%(namespaces)b::text[], %(names)b::text[]) AS k(namespace, name)
      ON j.schedule_namespace = k.namespace AND j.schedule_name = k.name
    WHERE j.status IN ('available', 'running')
    FOR UPDATE OF j SKIP LOCKED
)
UPDATE tickwork.jobs j
SET status = CASE WHEN j.status = 'available' THEN 'cancelled'
                  ELSE j.status END::tickwork.job_status,
    finished_at = CASE WHEN j.status = 'available' THEN coalesce(%(now)s, now()) END,
    cancel_requested_at = CASE WHEN j.status = 'running'
                               THEN coalesce(j.cancel_requested_at, %(now)s, now()) END,
    last_error = 'cancelled: replaced by a newer occurrence of its schedule',
    version = CASE WHEN j.status = 'available' THEN j.version + 1 ELSE j.version END
FROM open
WHERE j.id = open.id
RETURNING j.schedule_namespace, j.schedule_name;

-- name: job_cancel_pending_of_schedules
-- Sync with pruning: the pending jobs (available: delayed, due, or waiting for a retry) of
-- schedules this transaction disabled are cancelled; running ones are not touched and finish.
-- A job another transaction holds (a claim in flight) is waited for and then re-read: one
-- claimed meanwhile is running and left alone, so each job either runs or is cancelled.
-- The trigger jobs_schedule_ended records the outcome on each schedule.
WITH pending AS (
    SELECT j.id
    FROM tickwork.jobs j
    WHERE j.schedule_namespace = %(namespace)s
      AND j.schedule_name = ANY(%(names)b::text[])
      AND j.status = 'available'
    ORDER BY j.id
    FOR UPDATE OF j
)
UPDATE tickwork.jobs j
SET status = 'cancelled',
    finished_at = coalesce(%(now)s, now()),
    last_error = 'cancelled: its schedule was disabled by pruning (deleted)',
    version = j.version + 1
FROM pending
WHERE j.id = pending.id
RETURNING j.id, j.schedule_name, j.queue, j.kind;

-- name: job_record_cancelled
-- The worker stopped a job that was asked to stop (or never started it).
UPDATE tickwork.jobs
SET status = 'cancelled',
    finished_at = coalesce(%(now)s, now()),
    lease_expires_at = NULL,
    version = version + 1
WHERE id = %(id)s AND version = %(version)s AND status = 'running'
  AND cancel_requested_at IS NOT NULL
RETURNING id;

-- name: job_retry_dead
-- An operator sends a dead (or cancelled) job back to available with fresh attempts (and no
-- interruptions counted).
UPDATE tickwork.jobs
SET status = 'available',
    attempt = 0,
    interruptions = 0,
    run_at = coalesce(%(now)s, now()),
    finished_at = NULL,
    picked_by = NULL,
    cancel_requested_at = NULL,
    on_dead_pending = false,
    version = version + 1
WHERE id = %(id)s AND status IN ('dead', 'cancelled')
RETURNING id;

-- name: job_run_now
-- Release a delayed job immediately and wake the workers of its queue.
UPDATE tickwork.jobs
SET run_at = coalesce(%(now)s, now()),
    version = version + 1
WHERE id = %(id)s AND status = 'available'
RETURNING id, pg_notify('tickwork_jobs', queue);

-- name: job_get
SELECT id, kind, queue, payload::text AS payload_json, priority, run_at, attempt,
       max_attempts, version, retry_base_seconds, retry_rate, retry_max_seconds,
       timeout_seconds, concurrency_key, unique_key, schedule_namespace, schedule_name,
       occurrence_at, lease_expires_at, started_at, status::text AS status, picked_by,
       trace_context, last_error, created_at, finished_at
FROM tickwork.jobs
WHERE id = %(id)s;

-- name: job_statuses
-- The status of each of these jobs that still exists (the container-jobs reconciler reads
-- those of the Jobs labelled with a job id; a job missing here was deleted by retention).
SELECT id, status::text AS status
FROM tickwork.jobs
WHERE id = ANY (%(ids)s::bigint[]);

-- name: job_list
SELECT id, kind, queue, payload::text AS payload_json, priority, run_at, attempt,
       max_attempts, version, retry_base_seconds, retry_rate, retry_max_seconds,
       timeout_seconds, concurrency_key, unique_key, schedule_namespace, schedule_name,
       occurrence_at, lease_expires_at, started_at, status::text AS status, picked_by,
       trace_context, last_error, created_at, finished_at
FROM tickwork.jobs
WHERE (%(status)s::tickwork.job_status IS NULL OR status = %(status)s::tickwork.job_status)
  AND (%(kind)s::text IS NULL OR kind = %(kind)s)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s)
ORDER BY id DESC
LIMIT %(limit)s;

-- name: job_lock_snapshot
-- A job before an action, locked: its status, whether it is due, and its snapshot (the same
-- fields as the "after" snapshot of admin_audit_job).
SELECT status, run_at <= coalesce(%(now)s, now()) AS due, schedule_namespace,
       jsonb_build_object('status', status, 'run_at', run_at, 'attempt', attempt,
                          'max_attempts', max_attempts, 'version', version,
                          'picked_by', picked_by, 'lease_expires_at', lease_expires_at,
                          'finished_at', finished_at) AS snapshot
FROM tickwork.jobs
WHERE id = %(id)s
FOR UPDATE;

-- name: job_delete_finished
-- Retention: delete one batch of jobs that finished before the cutoff.
WITH old AS (
    SELECT id FROM tickwork.jobs
    WHERE status IN ('succeeded', 'dead', 'cancelled')
      AND finished_at < coalesce(%(now)s, now()) - make_interval(secs => %(age_seconds)s)
    ORDER BY finished_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
DELETE FROM tickwork.jobs j USING old WHERE j.id = old.id
RETURNING j.id;

-- name: job_trim_histories
-- Retention's history limits: for up to %(schedules)s queued schedules (those whose jobs ended,
-- or whose limits changed, since they were last trimmed: schedule_history_pending), delete the
-- finished jobs beyond the newest successfulJobsHistoryLimit succeeded ones and the newest
-- failedJobsHistoryLimit dead or cancelled ones (newest: finished_at, then id), at most
-- %(limit)s of each outcome per schedule. Each schedule's history is one backward range of
-- jobs_schedule_history_idx per outcome (the failed one sorted: two statuses).
-- A queued schedule is taken by a transaction-scoped advisory lock (tried, never waited
-- for: two passes never trim one schedule at once), not by locking its queued row: the
-- statement trigger jobs_schedule_ended re-queues that row when a job of the schedule ends,
-- and a row lock held while thousands of jobs are deleted stalled every completion of the
-- schedule for as long (over a second with a backlog of 43,200, bench/fairness.py). A
-- schedule is dequeued at the end of the statement only if its row is still at the
-- generation this statement's snapshot saw, so a job that ended meanwhile leaves it queued;
-- and not when the cap was reached (then the next statement trims further). A job locked by
-- someone else, or no longer finished, is left alone. A queued schedule that no longer
-- exists is dequeued.
WITH seen AS (
    SELECT namespace, name, generation
    FROM tickwork.schedule_history_pending
    ORDER BY namespace, name
    LIMIT %(schedules)s
),
picked AS MATERIALIZED (
    SELECT seen.namespace, seen.name, seen.generation
    FROM seen
    WHERE pg_try_advisory_xact_lock(
        hashtextextended('tickwork:trim:' || seen.namespace || '/' || seen.name, 0))
),
limits AS (
    SELECT s.namespace, s.name, s.spec -> 'successfulJobsHistoryLimit' AS succeeded,
           s.spec -> 'failedJobsHistoryLimit' AS failed
    FROM picked
    JOIN tickwork.schedules s ON s.namespace = picked.namespace AND s.name = picked.name
),
kept AS (
    -- A stored spec without a limit (synced before they existed) gets the default; one with
    -- a value no sync writes (edited by hand: not a number within 0..%(max)s) keeps %(max)s,
    -- so a damaged row never deletes more, nor stops the pass.
    SELECT namespace, name,
           CASE WHEN coalesce(jsonb_typeof(succeeded), 'null') = 'null' THEN %(succeeded)s
                WHEN jsonb_typeof(succeeded) = 'number'
                     AND succeeded::text::numeric BETWEEN 0 AND %(max)s
                THEN floor(succeeded::text::numeric)::int
                ELSE %(max)s END AS succeeded,
           CASE WHEN coalesce(jsonb_typeof(failed), 'null') = 'null' THEN %(failed)s
                WHEN jsonb_typeof(failed) = 'number'
                     AND failed::text::numeric BETWEEN 0 AND %(max)s
                THEN floor(failed::text::numeric)::int
                ELSE %(max)s END AS failed
    FROM limits
),
doomed AS MATERIALIZED (
    SELECT k.namespace, k.name, d.id, false AS failed
    FROM kept k
    CROSS JOIN LATERAL (
        SELECT j.id FROM tickwork.jobs j
        WHERE j.schedule_namespace = k.namespace AND j.schedule_name = k.name
          AND j.status = 'succeeded'
        ORDER BY j.finished_at DESC, j.id DESC
        OFFSET k.succeeded LIMIT %(limit)s
    ) d
    UNION ALL
    SELECT k.namespace, k.name, d.id, true AS failed
    FROM kept k
    CROSS JOIN LATERAL (
        SELECT j.id FROM tickwork.jobs j
        WHERE j.schedule_namespace = k.namespace AND j.schedule_name = k.name
          AND j.status IN ('dead', 'cancelled')
        ORDER BY j.finished_at DESC, j.id DESC
        OFFSET k.failed LIMIT %(limit)s
    ) d
),
capped AS (
    SELECT DISTINCT namespace, name
    FROM (SELECT namespace, name FROM doomed
          GROUP BY namespace, name, failed
          HAVING count(*) >= %(limit)s) c
),
locked AS (
    SELECT j.id
    FROM tickwork.jobs j
    JOIN doomed ON doomed.id = j.id
    WHERE j.status IN ('succeeded', 'dead', 'cancelled')
    FOR UPDATE OF j SKIP LOCKED
),
deleted AS (
    DELETE FROM tickwork.jobs j USING locked WHERE j.id = locked.id
    RETURNING j.id
),
dequeued AS (
    DELETE FROM tickwork.schedule_history_pending p
    USING picked
    WHERE p.namespace = picked.namespace AND p.name = picked.name
      AND p.generation = picked.generation
      AND NOT EXISTS (SELECT FROM capped c WHERE c.namespace = p.namespace AND c.name = p.name)
)
SELECT (SELECT count(*) FROM seen) AS seen,
       (SELECT count(*) FROM picked) AS picked,
       (SELECT count(*) FROM capped) AS capped,
       (SELECT count(*) FROM deleted) AS deleted;

-- name: job_open_per_schedule
-- Overlap policies: the pending and running jobs of some schedules.
SELECT j.schedule_namespace, j.schedule_name,
       count(*) FILTER (WHERE j.status = 'available') AS available,
       count(*) FILTER (WHERE j.status = 'running') AS running
FROM tickwork.jobs j
JOIN unnest(%(namespaces)b::text[], %(names)b::text[]) AS k(namespace, name)
  ON j.schedule_namespace = k.namespace AND j.schedule_name = k.name
WHERE j.status IN ('available', 'running')
GROUP BY j.schedule_namespace, j.schedule_name;

-- name: job_open_of_namespaces
-- The operator's status: for each schedule of some namespaces, how many of its jobs are pending
-- or running (open_count, exact) and the first %(shown)s of them by id. schedule_name IS NOT
-- NULL lets jobs_schedule_open_idx serve it (a namespace alone does not imply its predicate).
SELECT schedule_namespace, schedule_name, id, status, occurrence_at, attempt, open_count
FROM (
    SELECT j.schedule_namespace, j.schedule_name, j.id, j.status, j.occurrence_at, j.attempt,
           count(*) OVER per_schedule AS open_count,
           row_number() OVER (per_schedule ORDER BY j.id) AS place
    FROM tickwork.jobs j
    WHERE j.status IN ('available', 'running') AND j.schedule_name IS NOT NULL
      AND j.schedule_namespace = ANY(%(namespaces)b::text[])
    WINDOW per_schedule AS (PARTITION BY j.schedule_namespace, j.schedule_name)
) open_jobs
WHERE place <= %(shown)s
ORDER BY schedule_namespace, schedule_name, id;

-- name: job_last_of_namespaces
-- The operator's status: the last job of each schedule of some namespaces, as the schedule row
-- records it (its id; its final status once it ended) and, until retention deletes it, as the
-- job row has it (status, times, attempt, error; its result as JSON text, only as much of it
-- as the status shows and one character more; why a result was not kept; its progress).
SELECT s.namespace, s.name, s.last_job_id AS id, coalesce(j.status, s.last_job_status) AS status,
       j.occurrence_at, j.started_at, j.finished_at, j.attempt, j.last_error,
       left(j.result::text, %(result_chars)s + 1) AS result_head, j.result_error, j.progress
FROM tickwork.schedules s
LEFT JOIN tickwork.jobs j ON j.id = s.last_job_id
WHERE s.namespace = ANY(%(namespaces)b::text[]) AND s.last_job_id IS NOT NULL
ORDER BY s.namespace, s.name;

-- name: job_gauge
-- Per queue and status: how many jobs, and for available ones the age of the oldest due one.
SELECT queue, 'available' AS status, count(*) AS count,
       coalesce(extract(epoch FROM coalesce(%(now)s, now())
                      - min(run_at) FILTER (WHERE run_at <= coalesce(%(now)s, now()))), 0)::float8
           AS oldest_due_age
FROM tickwork.jobs
WHERE status = 'available'
GROUP BY queue
UNION ALL
SELECT queue, 'running', count(*), 0
FROM tickwork.jobs
WHERE status = 'running'
GROUP BY queue
UNION ALL
SELECT queue, 'dead', count(*), 0
FROM tickwork.jobs
WHERE status = 'dead'
GROUP BY queue;

-- name: job_gauge_orphaned
-- Jobs of kinds no live worker registers (seen within %(ttl_seconds)s): available, running,
-- and dead with their on_dead hook pending, per kind and status. The statuses are ORed, not an
-- IN list, so that each arm is read through its partial index (jobs_claim_idx,
-- jobs_lease_idx, jobs_on_dead_pending_idx); IN matches none of them and the whole table is
-- read (2 s at 10,000,000 finished jobs kept: bench/history.py).
SELECT kind, status, count(*)
FROM tickwork.jobs
WHERE status = 'available' OR status = 'running' OR on_dead_pending
GROUP BY kind, status
HAVING kind NOT IN (
    SELECT unnest(kinds) FROM tickwork.workers
    WHERE last_seen_at >= coalesce(%(now)s, now()) - make_interval(secs => %(ttl_seconds)s));

-- name: job_queues
-- Per queue: backlog (due now, due later), running, finished in the last window, dead.
-- The open statuses are ORed, as job_gauge_orphaned explains. The jobs finished in the window
-- are counted from tickwork.job_counts (whole minutes, from the one the window starts in):
-- retention and history limits delete job rows, not counts.
WITH counted AS (
    SELECT queue,
           (status = 'available' AND run_at <= coalesce(%(now)s, now()))::int AS due,
           (status = 'available' AND run_at > coalesce(%(now)s, now()))::int AS later,
           (status = 'running')::int AS running,
           0 AS succeeded, 0 AS failed, 0 AS dead
    FROM tickwork.jobs WHERE (status = 'available' OR status = 'running') AND (%(scope)s::text[] IS NULL OR schedule_namespace = ANY (%(scope)s::text[]))
    UNION ALL
    SELECT queue, 0, 0, 0,
           CASE WHEN outcome = 'succeeded' THEN jobs ELSE 0 END,
           CASE WHEN outcome = 'dead' THEN jobs ELSE 0 END, 0
    FROM tickwork.job_counts
    WHERE outcome IN ('succeeded', 'dead')
      AND minute >= date_trunc('minute', coalesce(%(now)s, now())
                                         - make_interval(secs => %(window_seconds)s))
      AND (%(scope)s::text[] IS NULL OR schedule_namespace = ANY (%(scope)s::text[]))
    UNION ALL
    SELECT queue, 0, 0, 0, 0, 0, 1 FROM tickwork.jobs WHERE status = 'dead' AND (%(scope)s::text[] IS NULL OR schedule_namespace = ANY (%(scope)s::text[]))
)
SELECT queue, sum(due) AS due, sum(later) AS later, sum(running) AS running,
       sum(succeeded) AS succeeded, sum(failed) AS failed, sum(dead) AS dead
FROM counted
GROUP BY queue
ORDER BY queue
LIMIT %(limit)s;

-- name: job_queue_waits
-- Per queue and schedule namespace (NULL: jobs enqueued outside any schedule), then per queue
-- (by_queue), the waiting jobs (available and due) and the oldest wait: now less the run_at of
-- the oldest of them. One pass over the available jobs through their partial index
-- (jobs_claim_idx), those due kept: its cost grows with the backlog, as job_queues' does,
-- not with the finished jobs kept.
SELECT queue, schedule_namespace AS namespace,
       grouping(schedule_namespace) = 1 AS by_queue,
       count(*) AS waiting,
       extract(epoch FROM coalesce(%(now)s, now()) - min(run_at))::float8 AS oldest_wait_seconds
FROM tickwork.jobs
WHERE status = 'available' AND run_at <= coalesce(%(now)s, now())
  AND (%(scope)s::text[] IS NULL OR schedule_namespace = ANY (%(scope)s::text[]))
GROUP BY GROUPING SETS ((queue, schedule_namespace), (queue))
ORDER BY queue, by_queue DESC, namespace NULLS LAST
LIMIT %(limit)s;

-- name: job_page
-- A keyset page of jobs, newest first, under optional filters; failing: available again
-- after a failed attempt. A running job's picker comes with its process's last heartbeat;
-- the last error's end (of a traceback: the exception).
SELECT j.id, j.kind, j.queue, j.status, j.attempt, j.max_attempts, j.priority, j.run_at,
       j.created_at, j.started_at, j.finished_at, j.schedule_namespace, j.schedule_name,
       j.occurrence_at, j.picked_by, j.lease_expires_at,
       CASE WHEN j.status = 'running' THEN w.last_seen_at END AS picker_seen_at,
       right(j.last_error, %(error_chars)s) AS last_error
FROM tickwork.jobs j
LEFT JOIN tickwork.workers w ON w.incarnation = j.picked_by_incarnation
WHERE (%(status)s::tickwork.job_status IS NULL OR j.status = %(status)s::tickwork.job_status)
  AND (NOT %(failing)s OR (j.status = 'available' AND j.attempt > 0
                           AND j.last_error IS NOT NULL))
  AND (%(kind)s::text IS NULL OR j.kind = %(kind)s)
  AND (%(queue)s::text IS NULL OR j.queue = %(queue)s)
  AND (%(namespace)s::text IS NULL OR j.schedule_namespace = %(namespace)s)
  AND (%(scope)s::text[] IS NULL OR j.schedule_namespace = ANY (%(scope)s::text[]))
  AND (%(schedule)s::text IS NULL OR j.schedule_name = %(schedule)s)
  AND (%(before)s::bigint IS NULL OR j.id < %(before)s)
ORDER BY j.id DESC
LIMIT %(limit)s;

-- name: job_page_by_kind
-- job_page filtered by kind within known schedule namespaces (a scoped reader's, or the one
-- filtered on): each namespace is walked newest first through jobs_namespace_kind_idx
-- (migration 0024) for at most a page, and the walks are merged, so the page costs a few
-- index descents however few of the namespaces' jobs are of that kind. Jobs enqueued outside
-- any schedule have no namespace: none is listed here (no scoped reader sees them).
SELECT j.id, j.kind, j.queue, j.status, j.attempt, j.max_attempts, j.priority, j.run_at,
       j.created_at, j.started_at, j.finished_at, j.schedule_namespace, j.schedule_name,
       j.occurrence_at, j.picked_by, j.lease_expires_at,
       CASE WHEN j.status = 'running' THEN w.last_seen_at END AS picker_seen_at,
       right(j.last_error, %(error_chars)s) AS last_error
FROM unnest(%(namespaces)s::text[]) AS scoped(namespace)
CROSS JOIN LATERAL (
    SELECT *
    FROM tickwork.jobs j
    WHERE j.schedule_namespace = scoped.namespace
      AND j.kind = %(kind)s
      AND j.id < coalesce(%(before)s::bigint, 9223372036854775807)
      AND (%(status)s::tickwork.job_status IS NULL
           OR j.status = %(status)s::tickwork.job_status)
      AND (NOT %(failing)s OR (j.status = 'available' AND j.attempt > 0
                               AND j.last_error IS NOT NULL))
      AND (%(queue)s::text IS NULL OR j.queue = %(queue)s)
      AND (%(schedule)s::text IS NULL OR j.schedule_name = %(schedule)s)
    ORDER BY j.id DESC
    LIMIT %(limit)s
) AS j
LEFT JOIN tickwork.workers w ON w.incarnation = j.picked_by_incarnation
ORDER BY j.id DESC
LIMIT %(limit)s;

-- name: job_orphans
-- Kinds with available jobs that no live worker serves from their queue.
WITH live AS (
    SELECT kinds, queues FROM tickwork.workers
    WHERE last_seen_at >= coalesce(%(now)s, now()) - make_interval(secs => %(ttl_seconds)s)
),
pending AS (
    SELECT kind, queue, count(*) AS jobs, min(run_at) AS oldest_run_at
    FROM tickwork.jobs
    WHERE status = 'available' AND (%(scope)s::text[] IS NULL OR schedule_namespace = ANY (%(scope)s::text[]))
    GROUP BY kind, queue
)
SELECT p.kind, p.queue, p.jobs, p.oldest_run_at,
       EXISTS (SELECT 1 FROM live WHERE p.kind = ANY (live.kinds)) AS kind_served
FROM pending p
WHERE NOT EXISTS (SELECT 1 FROM live WHERE p.kind = ANY (live.kinds)
                                       AND p.queue = ANY (live.queues))
ORDER BY p.jobs DESC, p.kind, p.queue
LIMIT %(limit)s;

-- Statements on other tables that read tickwork.jobs.

-- name: claim_floor_refresh
-- The claim floors (migration 0013), one per queue and kind with available or running jobs or
-- a floor already: the oldest run_at of its available jobs, never later than now, less the
-- margin; valid for %(valid_seconds)s. The statuses are ORed, as job_gauge_orphaned explains.
WITH pairs AS (
    SELECT queue, kind, min(run_at) FILTER (WHERE status = 'available') AS oldest
    FROM tickwork.jobs
    WHERE status = 'available' OR status = 'running'
    GROUP BY queue, kind
),
floors AS (
    SELECT coalesce(p.queue, f.queue) AS queue, coalesce(p.kind, f.kind) AS kind,
           least(p.oldest, coalesce(%(now)s, now()))
               - make_interval(secs => %(margin_seconds)s) AS floor
    FROM pairs p
    FULL JOIN tickwork.claim_floors f ON f.queue = p.queue AND f.kind = p.kind
)
INSERT INTO tickwork.claim_floors (queue, kind, floor, valid_until)
SELECT queue, kind, floor, coalesce(%(now)s, now()) + make_interval(secs => %(valid_seconds)s)
FROM floors
ORDER BY queue, kind
ON CONFLICT (queue, kind) DO UPDATE
    SET floor = EXCLUDED.floor, valid_until = EXCLUDED.valid_until
RETURNING queue, kind, floor;

-- name: worker_seen_of_job
-- The last heartbeat of the worker process whose claim the job runs under (none: not running,
-- or that process's row is gone), and whether it is stale (older than two of its heartbeats).
SELECT w.last_seen_at,
       w.last_seen_at < coalesce(%(now)s, now()) - make_interval(secs => 2 * w.heartbeat_seconds)
           AS stale
FROM tickwork.jobs j
JOIN tickwork.workers w ON w.incarnation = j.picked_by_incarnation
WHERE j.id = %(id)s;

-- name: schedule_lock_namespace
-- Sync: every schedule of the namespace, locked in name order (waits for a firing pass
-- holding one of them, so the values read are current).
SELECT s.name, s.revision, s.enabled, s.suspended, s.spec, s.next_run_at, s.missed_before,
       EXISTS (SELECT 1 FROM tickwork.jobs j
               WHERE j.id = s.last_job_id AND j.status IN ('available', 'running'))
           AS last_job_open
FROM tickwork.schedules s
WHERE s.namespace = %(namespace)s
ORDER BY s.name
FOR UPDATE OF s;

-- name: schedule_list
SELECT s.namespace, s.name, s.revision, s.enabled, s.suspended AS suspend,
       s.spec ->> 'schedule' AS schedule, s.spec ->> 'every' AS every,
       s.spec ->> 'timeZone' AS time_zone, s.next_run_at, s.last_occurrence_at, s.last_job_id,
       coalesce(j.status, s.last_job_status) AS last_job_status, s.last_success_at,
       s.skipped_occurrences,
       n.owner, s.spec, s.state, s.created_at, s.updated_at,
       s.firing_error, s.firing_failures, s.firing_retry_at,
       s.dead_streak, s.dead_streak_job_id, s.failures_suspended_at,
       s.failures_suspended_job_id, s.deadlines_missed, s.late_occurrence_at,
       s.late_deadline_at, s.late_job_id, s.late_at
FROM tickwork.schedules s
JOIN tickwork.schedule_namespaces n ON n.namespace = s.namespace
LEFT JOIN tickwork.jobs j ON j.id = s.last_job_id
WHERE (%(namespace)s::text IS NULL OR s.namespace = %(namespace)s)
  AND (%(name)s::text IS NULL OR s.name = %(name)s)
ORDER BY s.namespace, s.name;

-- name: admin_schedules
-- A keyset page of schedules in (namespace, name) order, with the status of each one's last
-- job, its last failure (latest dead job) and its firing error (set aside until a retry).
-- A spec with a jobTemplate fires the reserved kind (tickwork.schedules.container_jobs.KIND).
SELECT s.namespace, s.name, n.owner, s.revision, s.enabled, s.suspended,
       s.spec ->> 'schedule' AS schedule, s.spec ->> 'every' AS every,
       s.spec ->> 'timeZone' AS time_zone,
       CASE WHEN s.spec ? 'jobTemplate' THEN 'tickwork.kubernetes-job'
            ELSE s.spec -> 'job' ->> 'kind' END AS kind,
       s.spec ->> 'concurrencyPolicy' AS concurrency_policy,
       s.next_run_at, s.last_occurrence_at, s.last_job_id,
       coalesce(j.status, s.last_job_status) AS last_job_status, s.last_success_at,
       failure.finished_at AS last_failure_at,
       s.skipped_occurrences, s.firing_error, s.firing_failures, s.firing_retry_at,
       s.dead_streak, s.dead_streak_job_id, s.failures_suspended_at,
       s.failures_suspended_job_id, s.late_occurrence_at, s.late_job_id,
       s.late_deadline_at IS NOT NULL
           AND (s.last_success_at IS NULL OR s.last_success_at <= s.late_deadline_at) AS late
FROM tickwork.schedules s
JOIN tickwork.schedule_namespaces n ON n.namespace = s.namespace
LEFT JOIN tickwork.jobs j ON j.id = s.last_job_id
LEFT JOIN LATERAL (
    SELECT d.finished_at FROM tickwork.jobs d
    WHERE d.schedule_namespace = s.namespace AND d.schedule_name = s.name
      AND d.status = 'dead'
    ORDER BY d.finished_at DESC
    LIMIT 1
) AS failure ON true
WHERE (%(namespace)s::text IS NULL OR s.namespace = %(namespace)s)
  AND (%(scope)s::text[] IS NULL OR s.namespace = ANY (%(scope)s::text[]))
  AND (%(name)s::text IS NULL OR s.name = %(name)s)
  AND (%(after_namespace)s::text IS NULL
       OR (s.namespace, s.name) > (%(after_namespace)s::text, %(after_name)s::text))
ORDER BY s.namespace, s.name
LIMIT %(limit)s;

-- name: admin_workers
-- Workers with their running jobs (counted in one pass over the running jobs); scoped,
-- the workers that fire one of the namespaces, naming only those.
WITH running AS (
    SELECT picked_by_incarnation, count(*) AS jobs
    FROM tickwork.jobs
    WHERE status = 'running'
      AND (%(scope)s::text[] IS NULL OR schedule_namespace = ANY (%(scope)s::text[]))
    GROUP BY picked_by_incarnation
)
SELECT w.name, w.queues, w.kinds,
       CASE WHEN %(scope)s::text[] IS NULL THEN w.namespaces
            ELSE ARRAY(SELECT n FROM unnest(w.namespaces) AS n
                       WHERE n = ANY (%(scope)s::text[])) END AS namespaces,
       w.concurrency, w.host, w.started_at,
       w.last_seen_at,
       w.last_seen_at >= coalesce(%(now)s, now()) - make_interval(secs => %(ttl_seconds)s)
           AS alive,
       w.last_seen_at < coalesce(%(now)s, now()) - make_interval(secs => 2 * w.heartbeat_seconds)
           AS stale,
       coalesce(r.jobs, 0) AS running
FROM tickwork.workers w
LEFT JOIN running r ON r.picked_by_incarnation = w.incarnation
WHERE %(scope)s::text[] IS NULL OR w.namespaces && %(scope)s::text[]
ORDER BY w.name
LIMIT %(limit)s;

-- name: admin_totals
SELECT (SELECT count(*) FROM tickwork.jobs WHERE status = 'dead' AND (%(scope)s::text[] IS NULL OR schedule_namespace = ANY (%(scope)s::text[]))) AS dead_jobs,
       (SELECT count(*) FROM tickwork.jobs
        WHERE status = 'available' AND attempt > 0 AND last_error IS NOT NULL AND (%(scope)s::text[] IS NULL OR schedule_namespace = ANY (%(scope)s::text[]))) AS failing_jobs,
       (SELECT coalesce(sum(skipped_occurrences), 0) FROM tickwork.schedules WHERE (%(scope)s::text[] IS NULL OR namespace = ANY (%(scope)s::text[]))) AS skipped_occurrences,
       (SELECT count(*) FROM tickwork.schedules WHERE enabled AND (%(scope)s::text[] IS NULL OR namespace = ANY (%(scope)s::text[]))) AS enabled_schedules,
       (SELECT count(*) FROM tickwork.schedule_namespaces WHERE (%(scope)s::text[] IS NULL OR namespace = ANY (%(scope)s::text[]))) AS namespaces,
       coalesce(%(now)s, now()) AS now;

-- name: admin_audit
-- Audit records (of one target), newest first, as a keyset page; scoped, only those of the
-- namespaces' schedules and of their jobs.
SELECT id, at, actor, action, target, reason, request_id, details
FROM tickwork.audit_log
WHERE (%(target)s::text IS NULL OR target = %(target)s)
  AND (%(before)s::bigint IS NULL OR id < %(before)s)
  AND (%(scope)s::text[] IS NULL OR CASE
       WHEN target ~ '^job:[0-9]{1,18}$' THEN EXISTS (
           SELECT 1 FROM tickwork.jobs j
           WHERE j.id = substr(target, 5)::bigint
             AND j.schedule_namespace = ANY (%(scope)s::text[]))
       WHEN target LIKE 'schedule:%%'
           THEN split_part(substr(target, 10), '/', 1) = ANY (%(scope)s::text[])
       ELSE false END)
ORDER BY id DESC
LIMIT %(limit)s;

-- name: admin_audit_job
-- The audit record of an action on a job, with its snapshot before and after.
INSERT INTO tickwork.audit_log (at, actor, action, target, reason, request_id, details)
SELECT coalesce(%(now)s, now()), %(actor)s, %(action)s, 'job:' || j.id, %(reason)s,
       %(request_id)s,
       jsonb_build_object(
           'before', %(before)s::jsonb,
           'after', jsonb_build_object('status', status, 'run_at', run_at, 'attempt', attempt,
                                       'max_attempts', max_attempts, 'version', version,
                                       'picked_by', picked_by,
                                       'lease_expires_at', lease_expires_at,
                                       'finished_at', finished_at))
FROM tickwork.jobs j
WHERE j.id = %(id)s
RETURNING id;
