-- What the PostgreSQL server allows and has in use, and the connections the live tickwork fleet
-- registered (tickwork.db.budget): read at a worker's or an operator's start, and by
-- `tickwork doctor`. Every role may read these (pg_settings, pg_stat_activity's counts).

-- name: server_connection_limits
-- reserved_connections exists from PostgreSQL 16 on: 0 before.
SELECT current_setting('max_connections')::integer AS max_connections,
       current_setting('superuser_reserved_connections')::integer AS superuser_reserved,
       coalesce((SELECT setting::integer FROM pg_settings WHERE name = 'reserved_connections'),
                0) AS reserved;

-- name: server_fleet_connections
-- The live registered processes of each kind, the sum of the connections they recorded and how
-- many recorded none (a version before migration 0023). A worker is live until it misses two
-- heartbeats (the rule of `tickwork workers`), an operator until its entry expires (the rule of
-- the operators' registry).
SELECT 'worker' AS kind, count(*)::integer AS processes,
       coalesce(sum(connections), 0)::integer AS recorded,
       (count(*) - count(connections))::integer AS unrecorded
FROM tickwork.workers
WHERE last_seen_at >= coalesce(%(now)s, now()) - make_interval(secs => 2 * heartbeat_seconds)
UNION ALL
SELECT 'operator' AS kind, count(*)::integer AS processes,
       coalesce(sum(connections), 0)::integer AS recorded,
       (count(*) - count(connections))::integer AS unrecorded
FROM tickwork.operators
WHERE expires_at >= now();

-- name: server_activity
-- Client connections open now: on the whole server, to this database, and idle in a
-- transaction; and the age of the oldest open transaction but this one's (a role without
-- pg_read_all_stats sees the state and start of its own sessions only).
SELECT count(*)::integer AS in_use,
       (count(*) FILTER (WHERE datname = current_database()))::integer AS in_database,
       (count(*) FILTER (WHERE state IN ('idle in transaction',
                                            'idle in transaction (aborted)')))::integer
           AS idle_in_transaction,
       extract(epoch FROM max(now() - xact_start) FILTER (WHERE pid <> pg_backend_pid()))::float8
           AS oldest_transaction_seconds
FROM pg_stat_activity
WHERE backend_type = 'client backend';

-- name: server_settings
-- The settings `tickwork doctor` judges, as this session sees them (per-database and per-role
-- settings included).
SELECT name, setting, unit FROM pg_settings WHERE name = ANY(%(names)s) ORDER BY name;

-- name: server_jobs_table
-- tickwork.jobs' own storage options (its autovacuum_* settings among them) and its vacuum
-- statistics.
SELECT coalesce(c.reloptions, '{}') AS options,
       coalesce(s.n_live_tup, 0) AS live_rows, coalesce(s.n_dead_tup, 0) AS dead_rows,
       greatest(s.last_autovacuum, s.last_vacuum) AS last_vacuum_at,
       s.last_autovacuum AS last_autovacuum_at, now() AS now
FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE c.oid = 'tickwork.jobs'::regclass;

-- name: server_own_limits
-- The connection limits of this session's role and database (CONNECTION LIMIT; -1: none),
-- which refuse connections before max_connections does.
SELECT current_user AS role,
       (SELECT rolconnlimit FROM pg_roles WHERE rolname = current_user)::integer AS role_limit,
       current_database() AS database,
       (SELECT datconnlimit FROM pg_database WHERE datname = current_database())::integer
           AS database_limit;
