-- Benchmark verdicts as jobs a fleet shares (job_queue.h): enqueued through any server,
-- claimed by one that has an idle device of the job's kind, held under a lease its heartbeat
-- renews, finished in the transaction that stores its results (fenced by worker and attempt),
-- re-queued by one server when the lease runs out. Times in microseconds since the epoch.
CREATE TABLE jobs (
  run_id TEXT PRIMARY KEY,          -- the run its results are stored under
  owner TEXT NOT NULL,
  device_kind TEXT NOT NULL,        -- "cuda" or "cpu": who may claim it
  priority INTEGER NOT NULL,        -- 0 waited for, 1 scheduled, 2 reproduction
  suite TEXT NOT NULL,
  request TEXT NOT NULL,            -- the BenchmarkRequest, serialized and base64-encoded
  state TEXT NOT NULL,              -- queued, running, done, failed, cancelled
  enqueued_at_us BIGINT NOT NULL,
  started_at_us BIGINT,
  finished_at_us BIGINT,
  worker TEXT,                      -- the server that holds (or last held) it
  lease_until_us BIGINT,
  attempts INTEGER NOT NULL DEFAULT 0,
  max_attempts INTEGER NOT NULL,
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  message TEXT NOT NULL DEFAULT ''  -- why it failed or was cancelled
);
CREATE INDEX jobs_by_state ON jobs (state, priority, enqueued_at_us);
CREATE INDEX jobs_by_owner_start ON jobs (owner, started_at_us);
