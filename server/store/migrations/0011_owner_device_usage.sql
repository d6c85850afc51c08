-- Device-seconds each owner's jobs held, by the minute, as every server sharing the database
-- charges them (owner_usage_table.h): --owner-device-seconds-per-hour sums an owner's minutes
-- of the last hour from here, so the budget holds across the servers of a fleet and across a
-- server's restarts, instead of each server keeping its own in memory. Rows older than a day
-- are deleted as the owner is charged again.
CREATE TABLE owner_device_usage (
  owner TEXT NOT NULL,
  minute_us BIGINT NOT NULL,
  device_us BIGINT NOT NULL,
  PRIMARY KEY (owner, minute_us)
);
