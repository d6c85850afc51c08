-- Fair by device time, not by turns (job_queue.h): each owner's place in the claim order,
-- `fair_at_us`, moves ahead by every second its queued jobs hold a device (charged by the
-- running server at each heartbeat and at the job's end) from a floor of one hour before the
-- charge, so an owner whose jobs ran for an hour waits behind one whose jobs ran for a minute,
-- and use older than the hour is forgotten. Owners of equal standing still take turns by
-- last_started_at_us. A column of the one row per owner: the claim reads it with the join it
-- already makes.
ALTER TABLE job_owners ADD COLUMN fair_at_us BIGINT NOT NULL DEFAULT 0;
