// Submissions in the results database (migration 0005): the SubmissionRecords a fleet's
// servers share when they share --results-db. Rows and SQL only; the Registry keeps the rules.
#pragma once

#include <functional>
#include <memory>

#include "server/store/database.h"
#include "server/submissions/submission_records.h"

namespace kerneleval::server::store {

// `db` must outlive the table (the ResultStore's database). `usable` is asked before each
// statement: UNAVAILABLE while the store still waits for its database and its migrations.
std::shared_ptr<submissions::SubmissionRecords> OpenSubmissionTable(
    Database* db, std::function<absl::Status()> usable);

}  // namespace kerneleval::server::store
