-- When a run was stored, in microseconds: created_at is whole seconds, and two runs of one
-- second (a nightly gate's bench right after another) must still be told apart, so that "the
-- previous run" is the one stored before, not the one with the larger random id. 0 for runs
-- stored before this column: they order by created_at alone.
ALTER TABLE runs ADD COLUMN created_at_us BIGINT NOT NULL DEFAULT 0;
