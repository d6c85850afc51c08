-- The peak each result's SOL figure (the one tables show: the device-attribute peak, else the
-- first; common/preferred_sol.h) was measured against, stored with the result so that the
-- leaderboard and compare can tell SOL % of one peak from SOL % of another (a CPU's measured
-- copy peak moves between restarts). sol_peak_source is a kerneleval.v1.PeakSource; -1 marks
-- a result stored before this column, filled from its result_json when the server starts.
ALTER TABLE results ADD COLUMN sol_peak_source INTEGER NOT NULL DEFAULT -1;
ALTER TABLE results ADD COLUMN sol_peak_bytes_per_second DOUBLE PRECISION NOT NULL DEFAULT 0;
