-- Results and progress of jobs (tickwork.db.results; docs/results.md). A succeeded job's result
-- and result_error are written with its outcome (job_complete_many, jobs.sql); these are the
-- progress writes while it runs, and the reads that show all three.

-- name: job_progress_many
-- The latest progress of running jobs, one statement for all of a worker's jobs that reported
-- since its last write, fenced by version and status: a job that ended or changed hands keeps
-- what it has. "at" is the database's time of the write. The arrays are read through
-- subqueries, as job_complete_many's are, so that each job is found by its primary key.
UPDATE tickwork.jobs j
SET progress = p.progress || jsonb_build_object('at', coalesce(%(now)s, now()))
FROM unnest((SELECT %(ids)b::bigint[]), (SELECT %(versions)b::integer[]),
            (SELECT %(progress)s::jsonb[]))
     AS p(id, version, progress)
WHERE j.id = p.id AND j.version = p.version AND j.status::text = 'running'
RETURNING j.id;

-- name: job_results
-- What jobs returned and reported: the result (as JSON text), why it was not kept, the
-- latest progress.
SELECT id, result::text AS result_json, result_error, progress
FROM tickwork.jobs
WHERE id = ANY (%(ids)s::bigint[]);
