// The SQL pieces the store's queries share: the columns a stored result is read from, a
// filter as a WHERE clause, the term that hides other owners' submissions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kerneleval/v1/results.pb.h"
#include "server/store/database.h"
#include "server/store/viewer.h"

namespace kerneleval::server::store {

// A column read as an integer (0 when NULL or not a number).
std::int64_t Int(const std::optional<std::string>& v);

// The columns Select reads, in order (results joined with their run, and the regression
// verdict each got on arrival where it got one).
inline constexpr char kSelectColumns[] =
    "SELECT r.id, r.run_id, r.created_at, r.suite, runs.suite_hash, runs.server, r.result_json, "
    "r.samples, r.quantiles, r.downsampled, runs.report_json, r.owner, g.verdict, "
    "g.correctness_changed, g.ratio, g.ci_low, g.ci_high, g.p_value, g.baseline_results FROM "
    "results r JOIN runs ON runs.id = r.run_id LEFT JOIN regressions g ON g.result_id = r.id";

// A LIKE pattern matching `text` literally anywhere: "H200" finds "NVIDIA H200", and the
// `%` or `_` of a model name match themselves only (both engines honour kLikeEscape).
inline constexpr char kLikeEscape[] = " ESCAPE '\\'";
std::string Contains(const std::string& text);

// The term that keeps other owners' submissions out ("" for every result); `params` gets
// the owner. Built-ins are the rows without a submission hash.
std::string VisibleTo(const Viewer& viewer, std::vector<SqlValue>* params);

// WHERE clause and parameters of a filter (the parameters numbered from $1).
std::string Where(const v1::ResultFilter& f, const Viewer& viewer, std::vector<SqlValue>* params);

}  // namespace kerneleval::server::store
