-- Submissions a fleet shares: registered through any server, resolved and deleted through any
-- other. `record` is the StoredSubmission (spec with source, launch plan, diagnostics, owner,
-- and the compiled module) serialized and base64-encoded, so that both engines keep it as TEXT.
CREATE TABLE submissions (
  owner TEXT NOT NULL,
  id TEXT NOT NULL,               -- "sub-" + content hash
  name TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  record TEXT NOT NULL,
  PRIMARY KEY (owner, id)
);
CREATE UNIQUE INDEX submissions_by_name ON submissions (owner, name);
