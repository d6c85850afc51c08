-- Whose Benchmark stored each result (server/identity/caller_identity.h): a submission's results are
-- seen by its owner alone. Results stored before this column have the owner '' (unknown):
-- their built-ins stay visible to all, their submissions to nobody.
ALTER TABLE results ADD COLUMN owner TEXT NOT NULL DEFAULT '';
