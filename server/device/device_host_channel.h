// The two halves of the link between the server and a device host process: a socket that
// carries framed protobuf messages, and a shared memory region that carries tensors.
// Both ends use these classes; neither knows which side it is on.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "google/protobuf/message_lite.h"

namespace kerneleval::server {

// A connected Unix stream socket; owns the descriptor. Messages are framed by a 4-byte
// little-endian length.
class HostChannel {
 public:
  HostChannel() = default;
  explicit HostChannel(int fd) : fd_(fd) {}
  ~HostChannel() { Close(); }
  HostChannel(HostChannel&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  HostChannel& operator=(HostChannel&& other) noexcept;
  HostChannel(const HostChannel&) = delete;
  HostChannel& operator=(const HostChannel&) = delete;

  // UNAVAILABLE when the peer has gone.
  absl::Status Send(const google::protobuf::MessageLite& message);

  // Waits for one message. UNAVAILABLE when the peer has gone, DEADLINE_EXCEEDED after
  // `timeout`, DATA_LOSS for a malformed frame. `on_tick`, when set, is called about every
  // 10 ms while waiting (cancellation polling). For the first `spin` the socket is polled
  // without sleeping (ReplySpin()).
  absl::Status Receive(google::protobuf::MessageLite* message,
                       absl::Duration timeout = absl::InfiniteDuration(),
                       const std::function<void()>& on_tick = nullptr,
                       absl::Duration spin = absl::ZeroDuration());

  bool is_open() const { return fd_ >= 0; }
  void Close();

 private:
  absl::Status ReadExactly(void* data, std::size_t bytes, absl::Time deadline,
                           absl::Time spin_until, const std::function<void()>& on_tick);

  int fd_ = -1;
};

// How long a waiting end of the link polls before it sleeps on the socket: the server for a
// device host's reply, the host for the next call. A small call's reply, and the next call
// of a client that sends them one after another, come within it, and the process wake-up
// it saves is a large part of the round trip. Zero on machines with few cores.
absl::Duration ReplySpin();

// Shared memory (a memfd) mapped into both processes. The first kHeaderBytes hold control
// words; tensors live after them. The server sizes it; the host follows (MapSize).
class SharedRegion {
 public:
  static constexpr std::size_t kHeaderBytes = 4096;

  SharedRegion() = default;
  ~SharedRegion() { Reset(); }
  SharedRegion(SharedRegion&& other) noexcept;
  SharedRegion& operator=(SharedRegion&& other) noexcept;
  SharedRegion(const SharedRegion&) = delete;
  SharedRegion& operator=(const SharedRegion&) = delete;

  // A new region of kHeaderBytes (server side).
  static absl::StatusOr<SharedRegion> Create();
  // Takes ownership of a region descriptor received from the server (host side).
  static SharedRegion Adopt(int fd);

  // Grows or shrinks the region to kHeaderBytes + data_bytes and maps it (server side).
  absl::Status Resize(std::size_t data_bytes);
  // Maps the region at `total_bytes`, the size the server announced (host side).
  absl::Status MapSize(std::size_t total_bytes);

  int fd() const { return fd_; }
  std::size_t total_bytes() const { return bytes_; }
  unsigned char* data() { return static_cast<unsigned char*>(base_) + kHeaderBytes; }
  std::size_t data_bytes() const { return bytes_ > kHeaderBytes ? bytes_ - kHeaderBytes : 0; }
  // Set by the server to ask the host to stop a measurement between samples.
  // Both processes operate on it through their own mappings: only a lock-free atomic is
  // an atomic across processes.
  static_assert(std::atomic<std::uint32_t>::is_always_lock_free);
  std::atomic<std::uint32_t>& stop_flag() {
    return *static_cast<std::atomic<std::uint32_t>*>(base_);
  }

 private:
  absl::Status Remap(std::size_t bytes);  // maps `bytes`, then drops the old mapping
  void Unmap();
  void Reset();

  int fd_ = -1;
  void* base_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace kerneleval::server
