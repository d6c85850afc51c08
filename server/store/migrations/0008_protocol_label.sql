-- Each run's and result's protocol as leaderboards and metrics label it ("cold", "hot_graph",
-- metrics::ProtocolLabel), so that history and export can filter by it: results of two
-- protocols are never one series. '' for rows stored before this column, filled from the
-- run's report when the store opens (FillProtocolLabels).
ALTER TABLE runs ADD COLUMN protocol TEXT NOT NULL DEFAULT '';
ALTER TABLE results ADD COLUMN protocol TEXT NOT NULL DEFAULT '';
