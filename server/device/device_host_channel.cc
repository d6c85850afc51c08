#include "server/device/device_host_channel.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/device/device_settings.h"

namespace kerneleval::server {
namespace {

// Larger frames are a protocol error: tensors travel in the shared region, not here.
constexpr std::uint32_t kMaxFrameBytes = 64u << 20;
constexpr int kTickMillis = 10;

absl::Status Errno(const char* what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

}  // namespace

HostChannel& HostChannel::operator=(HostChannel&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void HostChannel::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

absl::Status HostChannel::Send(const google::protobuf::MessageLite& message) {
  if (fd_ < 0) return absl::UnavailableError("device host channel is closed");
  const std::size_t size = message.ByteSizeLong();
  if (size > kMaxFrameBytes) return absl::InternalError("device host message too large");
  std::string frame(4 + size, '\0');
  for (int i = 0; i < 4; ++i) frame[i] = static_cast<char>((size >> (8 * i)) & 0xff);
  if (!message.SerializeToArray(frame.data() + 4, static_cast<int>(size))) {
    return absl::InternalError("device host message: serialization failed");
  }
  std::size_t sent = 0;
  while (sent < frame.size()) {
    // MSG_NOSIGNAL: a peer that has died must give an error here, not SIGPIPE.
    const ssize_t n = send(fd_, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
      return absl::UnavailableError("device host channel: peer closed");
    }
    if (n < 0) return Errno("device host channel: send");
    sent += static_cast<std::size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status HostChannel::ReadExactly(void* data, std::size_t bytes, absl::Time deadline,
                                      absl::Time spin_until, const std::function<void()>& on_tick) {
  auto* out = static_cast<unsigned char*>(data);
  std::size_t got = 0;
  while (got < bytes) {
    // What has arrived is read without a poll; until `spin_until` an empty socket is asked
    // again rather than slept on, which saves the wake-up of a blocked thread.
    ssize_t n = recv(fd_, out + got, bytes - got, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const absl::Time now = absl::Now();
      if (now >= deadline) {
        return absl::DeadlineExceededError("device host channel: no answer in time");
      }
      if (now < spin_until) continue;
      pollfd p{fd_, POLLIN, 0};
      const int ready = poll(&p, 1, kTickMillis);
      if (ready < 0 && errno == EINTR) continue;
      if (ready < 0) return Errno("device host channel: poll");
      if (ready == 0) {
        if (on_tick) on_tick();
        continue;
      }
      n = recv(fd_, out + got, bytes - got, 0);
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 || (n < 0 && errno == ECONNRESET)) {
      return absl::UnavailableError("device host channel: peer closed");
    }
    if (n < 0) return Errno("device host channel: recv");
    got += static_cast<std::size_t>(n);
  }
  return absl::OkStatus();
}

absl::Duration ReplySpin() {
  // Only where cores are to spare: on a two-core machine a spinning waiter delays the very
  // threads it waits for (docs/results/rpc-overhead.md). Long enough to cover a client's
  // round trip between two calls sent one after another. DeviceSettings::link_spin_us
  // (the same on both ends: a device host gets the server's) sets it, 0 turning it off.
  const int us = CurrentDeviceSettings().link_spin_us;
  if (us >= 0) return absl::Microseconds(us);
  static const bool cores_to_spare = std::thread::hardware_concurrency() >= 8;
  return cores_to_spare ? absl::Microseconds(500) : absl::ZeroDuration();
}

absl::Status HostChannel::Receive(google::protobuf::MessageLite* message, absl::Duration timeout,
                                  const std::function<void()>& on_tick, absl::Duration spin) {
  if (fd_ < 0) return absl::UnavailableError("device host channel is closed");
  const absl::Time now = absl::Now();
  const absl::Time deadline =
      timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : now + timeout;
  const absl::Time spin_until = now + spin;
  unsigned char header[4];
  if (absl::Status s = ReadExactly(header, 4, deadline, spin_until, on_tick); !s.ok()) return s;
  std::uint32_t size = 0;
  for (int i = 0; i < 4; ++i) size |= static_cast<std::uint32_t>(header[i]) << (8 * i);
  if (size > kMaxFrameBytes) return absl::DataLossError("device host channel: oversized frame");
  std::string body(size, '\0');
  if (absl::Status s = ReadExactly(body.data(), size, deadline, spin_until, on_tick); !s.ok()) {
    return s;
  }
  if (!message->ParseFromString(body)) {
    return absl::DataLossError("device host channel: malformed message");
  }
  return absl::OkStatus();
}

SharedRegion::SharedRegion(SharedRegion&& other) noexcept
    : fd_(other.fd_), base_(other.base_), bytes_(other.bytes_) {
  other.fd_ = -1;
  other.base_ = nullptr;
  other.bytes_ = 0;
}

SharedRegion& SharedRegion::operator=(SharedRegion&& other) noexcept {
  if (this != &other) {
    Reset();
    fd_ = other.fd_;
    base_ = other.base_;
    bytes_ = other.bytes_;
    other.fd_ = -1;
    other.base_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

absl::StatusOr<SharedRegion> SharedRegion::Create() {
  SharedRegion region;
  region.fd_ = memfd_create("kerneleval-tensors", MFD_CLOEXEC);
  if (region.fd_ < 0) return Errno("memfd_create");
  if (absl::Status s = region.Resize(0); !s.ok()) return s;
  return region;
}

SharedRegion SharedRegion::Adopt(int fd) {
  SharedRegion region;
  region.fd_ = fd;
  return region;
}

absl::Status SharedRegion::Resize(std::size_t data_bytes) {
  const std::size_t total = kHeaderBytes + data_bytes;
  if (total == bytes_) return absl::OkStatus();
  const std::size_t old_total = bytes_;
  if (total > old_total) {
    // Reserved now: a memfd grown by ftruncate alone gets its pages on first touch, and memory
    // exhaustion would then surface as SIGBUS inside a memcpy instead of this error.
    const int err = posix_fallocate(fd_, 0, static_cast<off_t>(total));
    if (err != 0) {
      if (old_total > 0) (void)ftruncate(fd_, static_cast<off_t>(old_total));
      return absl::ResourceExhaustedError(
          absl::StrCat("shared tensor region of ", total, " bytes: ", std::strerror(err)));
    }
  }
  // The new mapping replaces the old one only once it exists: on failure the region keeps
  // its old, valid mapping.
  RETURN_IF_ERROR(Remap(total));
  if (total < old_total && ftruncate(fd_, static_cast<off_t>(total)) != 0) {
    return absl::InternalError(absl::StrCat("shrinking the shared tensor region to ", total,
                                            " bytes: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status SharedRegion::MapSize(std::size_t total_bytes) {
  if (total_bytes == bytes_) return absl::OkStatus();
  if (total_bytes < kHeaderBytes) return absl::InvalidArgumentError("shared region too small");
  return Remap(total_bytes);
}

absl::Status SharedRegion::Remap(std::size_t bytes) {
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (base == MAP_FAILED) return Errno("mmap of the shared tensor region");
  Unmap();
  base_ = base;
  bytes_ = bytes;
  return absl::OkStatus();
}

void SharedRegion::Unmap() {
  if (base_ != nullptr) munmap(base_, bytes_);
  base_ = nullptr;
  bytes_ = 0;
}

void SharedRegion::Reset() {
  Unmap();
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

}  // namespace kerneleval::server
