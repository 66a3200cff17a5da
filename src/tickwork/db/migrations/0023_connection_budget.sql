-- The connection budget (issue 31, item 3): each worker and operator records the most
-- connections it may hold on the PostgreSQL server at once (tickwork.db.budget states how
-- many each kind of process opens), so that a process starting, and `tickwork doctor`, can add
-- up the live fleet's and compare it with max_connections less the reserved slots.
-- Nullable, no default: a worker or operator of an earlier version registers without it and
-- is counted as what that version opens with its default settings (13 for a worker, 3 for an
-- operator: tickwork.db.budget.UNRECORDED). Both tables are small; nothing is rewritten.
ALTER TABLE tickwork.workers ADD COLUMN connections integer CHECK (connections >= 0);
ALTER TABLE tickwork.operators ADD COLUMN connections integer CHECK (connections >= 0);
