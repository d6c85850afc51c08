-- Retention downsamples the results of runs beyond the newest N: this index holds only the
-- results not yet downsampled, so a pass reads those, not every stored result.
CREATE INDEX results_not_downsampled ON results (run_id) WHERE downsampled = 0;
