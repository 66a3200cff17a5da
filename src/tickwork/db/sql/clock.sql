-- The database clock.

-- name: clock_now
SELECT coalesce(%(now)s, now()) AS now;
