// The owners' device budget of a server made one across the servers that share its results
// database, and kept across restarts: OwnerJobLimit's shared usage (server/device/
// owner_job_limit.h) on the store's OwnerUsageTable (server/store/owner_usage_table.h).
#pragma once

#include "server/device/owner_job_limit.h"
#include "server/store/result_store.h"

namespace kerneleval::server {

// Reads and writes `results`' database, which must outlive every use (the server clears the
// shared usage before its store closes). `results` must have a database (SQLite or
// PostgreSQL, not the in-memory store).
SharedOwnerUsage SharedOwnerUsageIn(const store::ResultStore& results);

}  // namespace kerneleval::server
