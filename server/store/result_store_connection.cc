// The store and a database that comes and goes: opened while PostgreSQL is down, it waits
// for it with backoff (ConnectLoop) while the server serves Run; a report written while the
// database restarts is retried until it answers (InsertRunRetrying).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "server/store/protocol_labels.h"
#include "server/store/result_store.h"
#include "server/store/sol_peaks.h"

namespace kerneleval::server::store {
namespace {

constexpr std::chrono::milliseconds kFirstBackoff{500};
constexpr std::chrono::milliseconds kMaxBackoff{30000};

}  // namespace

absl::Status ResultStore::Prepare() {
  if (absl::Status s = Migrate(db_.get()); !s.ok()) return s;
  if (absl::Status s = FillProtocolLabels(db_.get()); !s.ok()) return s;
  return FillStoredPeaks(db_.get());
}

std::string ResultStore::WaitingFor() const {
  std::lock_guard<std::mutex> lock(mu_);
  return connected_ ? "" : waiting_for_;
}

absl::Status ResultStore::CheckConnected() const {
  if (connected_) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      "the results database is not reachable yet (retrying with backoff): ", WaitingFor()));
}

void ResultStore::ConnectLoop() {
  std::chrono::milliseconds backoff = kFirstBackoff;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait_for(lock, backoff, [this] { return stop_; });
    if (stop_) return;
    lock.unlock();
    const absl::Status s = Prepare();
    lock.lock();
    if (s.ok()) {
      connected_ = true;
      waiting_for_.clear();
      cv_.notify_all();  // the writer has reports queued meanwhile
      lock.unlock();
      fprintf(stderr, "results store: the database answers; writing queued reports\n");
      if (options_.on_connection) options_.on_connection(true, "");
      return;
    }
    if (!absl::IsUnavailable(s)) {
      // The database answers but refuses the schema: no retry mends that. Logged, and the
      // store keeps saying what it waits for.
      fprintf(stderr, "results store: the database cannot be used: %s\n",
              std::string(s.message()).c_str());
    }
    waiting_for_ = std::string(s.message());
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
}

absl::StatusOr<std::string> ResultStore::InsertRunRetrying(const v1::BenchmarkReport& report,
                                                           const std::string& owner) {
  std::chrono::milliseconds backoff = kFirstBackoff;
  while (true) {
    // The run and its results are one transaction: a try cut by the database leaves nothing.
    auto written = InsertRun(report, 0, owner);
    if (written.ok() || !absl::IsUnavailable(written.status())) return written;
    fprintf(stderr, "results store: the database did not answer (retry in %lld ms): %s\n",
            static_cast<long long>(backoff.count()),
            std::string(written.status().message()).c_str());
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, backoff, [this] { return stop_; })) return written;
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
}

}  // namespace kerneleval::server::store
