// Each stored run and result carries its protocol's label (ProtocolLabel: "cold",
// "hot_graph", ...; migration 0008), which history and export filter by. Rows stored before
// that column are labelled from their run's stored report when the store opens.
#pragma once

#include "absl/status/status.h"
#include "server/store/database.h"

namespace kerneleval::server::store {

// Labels every run whose protocol is '' and its results, one run per transaction, from the
// run's stored report. Idempotent: servers sharing a database may all run it.
absl::Status FillProtocolLabels(Database* db);

}  // namespace kerneleval::server::store
