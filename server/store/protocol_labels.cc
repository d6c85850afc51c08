#include "server/store/protocol_labels.h"

#include <string>

#include "common/protocol.h"
#include "server/store/result_rows.h"

namespace kerneleval::server::store {

absl::Status FillProtocolLabels(Database* db) {
  auto rows = db->Query("SELECT id, report_json FROM runs WHERE protocol = ''");
  if (!rows.ok()) return rows.status();
  for (const SqlRow& row : *rows) {
    v1::BenchmarkReport header;
    // A header that does not parse is labelled as an empty Protocol is: "cold", the default.
    (void)FromJson(row[1].value_or("{}"), &header);
    const std::string label = ProtocolLabel(header.protocol());
    const std::string id = row[0].value_or("");
    absl::Status s = db->Transaction([&](Database& tx) -> absl::Status {
      auto results = tx.Query("UPDATE results SET protocol = $1 WHERE run_id = $2", {label, id});
      if (!results.ok()) return results.status();
      return tx.Query("UPDATE runs SET protocol = $1 WHERE id = $2", {label, id}).status();
    });
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace kerneleval::server::store
