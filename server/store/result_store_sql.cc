#include "server/store/result_store_sql.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kerneleval::server::store {

std::int64_t Int(const std::optional<std::string>& v) {
  std::int64_t n = 0;
  if (v.has_value()) (void)absl::SimpleAtoi(*v, &n);
  return n;
}

std::string Contains(const std::string& text) {
  std::string pattern = "%";
  for (char c : text) {
    if (c == '%' || c == '_' || c == '\\') pattern += '\\';
    pattern += c;
  }
  return pattern + "%";
}

std::string VisibleTo(const Viewer& viewer, std::vector<SqlValue>* params) {
  if (!viewer.has_value()) return "";
  params->push_back(*viewer);
  return absl::StrCat("(r.submission_hash = '' OR r.owner = $", params->size(), ")");
}

std::string Where(const v1::ResultFilter& f, const Viewer& viewer, std::vector<SqlValue>* params) {
  std::vector<std::string> terms;
  auto add = [&](const std::string& column_op, SqlValue v) {
    params->push_back(std::move(v));
    terms.push_back(absl::StrCat(column_op, " $", params->size()));
  };
  if (std::string visible = VisibleTo(viewer, params); !visible.empty()) {
    terms.push_back(std::move(visible));
  }
  if (!f.suite().empty()) add("r.suite =", f.suite());
  if (!f.workload().empty()) add("r.workload =", f.workload());
  if (!f.implementation().empty()) add("r.implementation =", f.implementation());
  if (!f.device_model().empty()) {
    params->push_back(Contains(f.device_model()));
    terms.push_back(absl::StrCat("r.device_model LIKE $", params->size(), kLikeEscape));
  }
  if (!f.run_id().empty()) add("r.run_id =", f.run_id());
  if (!f.protocol().empty()) add("r.protocol =", f.protocol());
  if (f.since_unix_seconds() != 0) add("r.created_at >=", f.since_unix_seconds());
  if (f.until_unix_seconds() != 0) add("r.created_at <", f.until_unix_seconds());
  if (terms.empty()) return "";
  std::string where = " WHERE ";
  for (std::size_t i = 0; i < terms.size(); ++i) {
    absl::StrAppend(&where, i == 0 ? "" : " AND ", terms[i]);
  }
  return where;
}

}  // namespace kerneleval::server::store
