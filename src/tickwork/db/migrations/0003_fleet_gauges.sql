-- The fleet gauges (tickwork_fleet_*): a maintenance duty like the others, sampled by
-- whichever worker claims its row. Its queries read jobs through the status-partial indexes
-- of 0001 (available, running) and jobs_status_id_idx of 0004 (dead), so finished jobs are
-- never scanned.
INSERT INTO tickwork.duties (name) VALUES ('sample_gauges');
