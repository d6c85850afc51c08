-- Benchmark runs and their results, with raw samples; regressions found on arrival.
-- The same SQL on SQLite and PostgreSQL: TEXT, BIGINT, DOUBLE PRECISION, INTEGER only.
-- Times are Unix seconds (UTC). Protos are kept as their JSON form (proto field names).

CREATE TABLE runs (
  id TEXT PRIMARY KEY,            -- random 128-bit hex: servers sharing a database never clash
  created_at BIGINT NOT NULL,
  suite TEXT NOT NULL,
  suite_hash TEXT NOT NULL,       -- SHA-256 of the definition's deterministic serialization
  server TEXT NOT NULL,           -- hostname
  server_version TEXT NOT NULL,
  git_revision TEXT NOT NULL,
  complete INTEGER NOT NULL,
  report_json TEXT NOT NULL       -- BenchmarkReport without its results
);
CREATE INDEX runs_by_suite ON runs (suite, created_at);
CREATE INDEX runs_by_time ON runs (created_at);

CREATE TABLE results (
  id TEXT PRIMARY KEY,            -- "<run id>/<index>"
  run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  created_at BIGINT NOT NULL,
  suite TEXT NOT NULL,
  workload TEXT NOT NULL,
  implementation TEXT NOT NULL,
  submission_hash TEXT NOT NULL,  -- "" for built-ins
  device TEXT NOT NULL,
  device_model TEXT NOT NULL,
  device_uuid TEXT NOT NULL,
  status INTEGER NOT NULL,        -- kerneleval.v1.ResultStatus
  median_seconds DOUBLE PRECISION NOT NULL,
  sol_ratio DOUBLE PRECISION NOT NULL,  -- against the device-attribute peak (else the first)
  sample_count INTEGER NOT NULL,
  seed TEXT NOT NULL,
  result_json TEXT NOT NULL,      -- WorkloadResult without samples_seconds
  samples TEXT,                   -- JSON array of seconds; NULL once downsampled
  quantiles TEXT,                 -- JSON array of 21 quantiles, set when downsampled
  downsampled INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX results_by_series ON results (suite, workload, implementation, device_model, created_at);
CREATE INDEX results_by_run ON results (run_id);
CREATE INDEX results_by_time ON results (created_at);

CREATE TABLE regressions (
  result_id TEXT PRIMARY KEY REFERENCES results (id) ON DELETE CASCADE,
  created_at BIGINT NOT NULL,
  suite TEXT NOT NULL,
  workload TEXT NOT NULL,
  implementation TEXT NOT NULL,
  device_model TEXT NOT NULL,
  verdict TEXT NOT NULL,          -- slower | faster | same | incomparable
  correctness_changed INTEGER NOT NULL,
  ratio DOUBLE PRECISION NOT NULL,
  ci_low DOUBLE PRECISION NOT NULL,
  ci_high DOUBLE PRECISION NOT NULL,
  p_value DOUBLE PRECISION NOT NULL,
  baseline_results INTEGER NOT NULL
);
CREATE INDEX regressions_by_time ON regressions (created_at);
