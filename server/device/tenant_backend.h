// A GPU's backend that keeps submitted code apart from everyone else's data: the device's
// own host (built-ins, OIP) runs no submitted code, and each owner's submissions run in a
// host of that owner alone, started on the owner's first submitted job. A kernel can read
// whatever its CUDA context maps (kept buffers of earlier calls, check records, guards), so
// the context is the boundary: a tenant host's memory only ever held its owner's tensors.
//
// The device's worker drives this backend as any other, so measurements on one GPU stay
// serialized whichever host runs them. Health, clocks and readiness are the device host's:
// a fault in a tenant host ends that host only (its caller gets INTERNAL, readiness does not
// drop), and the owner's next job starts a new one.
//
// Which owner a measurement runs for is carried explicitly (SubmittedKernel::tenant,
// MeasureOptions::tenant), never read from a submission id: two owners who register the
// same source get the same id.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "server/device/backend.h"

namespace kerneleval::server {

struct TenantHostOptions {
  // Hosts per GPU at most; a new owner's host stops the least recently used one first.
  std::size_t max_hosts = 4;
  // A host unused this long is stopped (its context, buffers and modules go with it). A
  // host holding a module unused this long is replaced at its owner's next job, before the
  // job's own module is loaded: modules leave with their context, and the new host loads only
  // what runs.
  double idle_seconds = 300;
};

class TenantBackend final : public Backend {
 public:
  // Starts the host for one owner's submissions on this device (not yet warmed up).
  using HostFactory =
      std::function<absl::StatusOr<std::unique_ptr<Backend>>(const std::string& tenant)>;

  TenantBackend(std::unique_ptr<Backend> device, HostFactory make_host,
                TenantHostOptions options = {});
  ~TenantBackend() override;  // stops the idle sweep, then every host

  const std::string& name() const override { return device_->name(); }
  v1::Device Describe() const override { return device_->Describe(); }
  std::vector<v1::Implementation> Implementations() const override {
    return device_->Implementations();
  }
  absl::Status WarmUp() override { return device_->WarmUp(); }
  // With options.tenant: in that owner's host (AddSubmission started it); without: in the
  // device's host, which refuses submission ids (FAILED_PRECONDITION: no owner named).
  absl::StatusOr<Measurement> Measure(const Problem& problem, const HostInputs& inputs,
                                      const HostOutputs& outputs, const std::string& impl,
                                      const MeasureOptions& options) override;
  // Loads `kernel` into the host of kernel.tenant, starting and warming that host first:
  // a host's start is never inside a measurement.
  absl::Status AddSubmission(const SubmittedKernel& kernel) override;
  double MeasuredCopyBandwidth() const override { return device_->MeasuredCopyBandwidth(); }
  v1::Clocks ReadClocks(bool* available) override { return device_->ReadClocks(available); }
  std::string DriverVersion() const override { return device_->DriverVersion(); }
  std::string RuntimeVersion() const override { return device_->RuntimeVersion(); }
  std::string TimerStatus() const override { return device_->TimerStatus(); }
  bool Healthy() const override { return device_->Healthy(); }
  absl::Status Recover() override { return device_->Recover(); }

  // `tenant` deleted submission `id`: the module leaves the device. The owner's host is
  // stopped when it has loaded `id`: now, or, while it runs a job of its owner, at the start
  // of the owner's next job or when it goes idle. Other owners' hosts keep theirs, even of
  // the same content (the same id). Thread-safe.
  void UnloadSubmission(const std::string& tenant, const std::string& id);

  // The owners whose hosts run now, most recently used first; and how many hosts were
  // started in all (for tests and logs).
  std::vector<std::string> Tenants() const;
  std::size_t hosts_started() const;
  // The submissions loaded in `tenant`'s running host (none without one), by id.
  std::vector<std::string> LoadedSubmissions(const std::string& tenant) const;

 private:
  struct Host {
    std::string tenant;
    std::shared_ptr<Backend> backend;
    std::chrono::steady_clock::time_point last_used;
    // The modules it loaded, by submission id, and when a job last named each.
    std::map<std::string, std::chrono::steady_clock::time_point> modules;
    bool stop_at_next_job = false;  // a module it holds was deleted during a job
  };
  // The running host of `tenant`, started (and an old one stopped) when there is none or
  // when it is stale (StaleLocked) for a job that loads `loading`.
  absl::StatusOr<std::shared_ptr<Backend>> HostFor(const std::string& tenant,
                                                   const std::string& loading);
  void SweepIdle();
  // Whether `h` is replaced before a job that loads `loading`: it holds a deleted module, or
  // another module unused for the idle time. Under mu_.
  bool StaleLocked(const Host& h, const std::string& loading,
                   std::chrono::steady_clock::time_point now) const;

  const std::unique_ptr<Backend> device_;
  const HostFactory make_host_;
  const TenantHostOptions options_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::vector<Host> hosts_;  // most recently used first
  // The owner whose job runs now (from AddSubmission to the end of its Measure): the idle
  // sweep leaves its host alone.
  std::string in_use_;
  std::size_t started_ = 0;
  bool stopping_ = false;
  std::thread sweeper_;
};

}  // namespace kerneleval::server
