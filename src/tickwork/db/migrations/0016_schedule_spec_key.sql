-- The key of a schedule's stored spec (the md5 of its canonical jsonb text: equal specs,
-- equal keys; the firing loop shares one parsed definition per key) is stored with the row,
-- computed when the spec is written. The firing claim and the cache warming computed it on
-- every read: the claim hashed each claimed row's spec (about 3 per cent of the database's
-- time while firing 1,000,000 schedules), and warming hashed every row it read before
-- cutting to its limit. A stored generated column is computed again only by a write that
-- sets spec (a firing's advance does not). Adding it rewrites the table, inside the
-- migration's transaction: writes to tickwork.schedules wait for it.
ALTER TABLE tickwork.schedules
    ADD COLUMN spec_key text GENERATED ALWAYS AS (md5(spec::text)) STORED;
