// Whose results a store query sees. Apart from result_store.h so that the SQL pieces the
// store's queries share (result_store_sql.h) need not include the store that uses them.
#pragma once

#include <optional>
#include <string>

namespace kerneleval::server::store {

// Whose results a query sees: every built-in's, and the results of `owner`'s own submissions
// (caller_identity.h); a submission's results under another owner are left out as if they
// did not exist. nullopt: every result (the store's own queries, and tests of the store).
using Viewer = std::optional<std::string>;

}  // namespace kerneleval::server::store
