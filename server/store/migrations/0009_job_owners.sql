-- Each owner's latest claim, kept as one row per owner: the queue's fair order (owners take
-- turns within a priority class, the one served longest ago first) reads it with a join
-- instead of a MAX over the owner's jobs for every queued row, which cost 51.6 ms a claim
-- with 10,000 queued on PostgreSQL (docs/results/queue-postgres.md). Written in the claim's
-- transaction; filled here from the jobs already started.
CREATE TABLE job_owners (
  owner TEXT PRIMARY KEY,
  last_started_at_us BIGINT NOT NULL
);
INSERT INTO job_owners (owner, last_started_at_us)
  SELECT owner, MAX(started_at_us) FROM jobs WHERE started_at_us IS NOT NULL GROUP BY owner;
