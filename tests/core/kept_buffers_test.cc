#include "server/device/kept_buffers.h"

#include <cstddef>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"

namespace kerneleval::server {
namespace {

// Host memory with DeviceBuffer's interface; allocations fail past a settable limit of live
// bytes, as cudaMalloc does when the device is full.
class HostBuffer {
 public:
  static inline std::size_t live_bytes = 0;
  static inline std::size_t limit_bytes = SIZE_MAX;
  static inline int allocations = 0;

  HostBuffer() = default;
  static absl::StatusOr<HostBuffer> Allocate(std::size_t bytes) {
    if (live_bytes + bytes > limit_bytes) return absl::ResourceExhaustedError("out of memory");
    HostBuffer b;
    b.data_ = std::make_unique<char[]>(bytes);
    b.bytes_ = bytes;
    live_bytes += bytes;
    ++allocations;
    return b;
  }
  HostBuffer(HostBuffer&& o) noexcept
      : data_(std::move(o.data_)), bytes_(std::exchange(o.bytes_, 0)) {}
  HostBuffer& operator=(HostBuffer&& o) noexcept {
    Free();
    data_ = std::move(o.data_);
    bytes_ = std::exchange(o.bytes_, 0);
    return *this;
  }
  ~HostBuffer() { Free(); }
  void* get() const { return data_.get(); }
  std::size_t bytes() const { return bytes_; }

 private:
  void Free() {
    live_bytes -= bytes_;
    data_.reset();
    bytes_ = 0;
  }
  std::unique_ptr<char[]> data_;
  std::size_t bytes_ = 0;
};

class KeptBuffersTest : public testing::Test {
 protected:
  void SetUp() override {
    HostBuffer::live_bytes = 0;
    HostBuffer::limit_bytes = SIZE_MAX;
    HostBuffer::allocations = 0;
  }
};

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr int kX = 0, kR = 1;

TEST_F(KeptBuffersTest, AWorkloadMeasuredAgainGetsTheBuffersItHadBefore) {
  KeptBuffers<HostBuffer> kept(1024 * kMiB);
  HostBuffer x, r;
  // A suite's run, small to large, twice.
  const std::size_t sizes[] = {4096, 3 * kMiB, 64 * kMiB};
  void* first_run[3][2] = {};
  for (int run = 0; run < 2; ++run) {
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(kept.Fit(kX, sizes[i], &x).ok());
      ASSERT_TRUE(kept.Fit(kR, sizes[i], &r).ok());
      EXPECT_EQ(x.bytes(), sizes[i]);
      if (run == 0) {
        first_run[i][0] = x.get();
        first_run[i][1] = r.get();
      } else {
        EXPECT_EQ(x.get(), first_run[i][0]) << "size " << sizes[i];
        EXPECT_EQ(r.get(), first_run[i][1]) << "size " << sizes[i];
      }
    }
  }
  EXPECT_EQ(HostBuffer::allocations, 6);  // the first run's only
}

TEST_F(KeptBuffersTest, KeepsABufferUpToOnePageLargerAndNoMore) {
  KeptBuffers<HostBuffer> kept(1024 * kMiB);
  HostBuffer x;
  ASSERT_TRUE(kept.Fit(kX, 5 * kMiB, &x).ok());
  void* five = x.get();
  ASSERT_TRUE(kept.Fit(kX, 3 * kMiB, &x).ok());  // 2 MiB of slack: served as it is
  EXPECT_EQ(x.get(), five);
  ASSERT_TRUE(kept.Fit(kX, 3 * kMiB - 1, &x).ok());  // one byte more than a page: a new one
  EXPECT_NE(x.get(), five);
  EXPECT_EQ(x.bytes(), 3 * kMiB - 1);
}

TEST_F(KeptBuffersTest, RolesDoNotShareBuffers) {
  KeptBuffers<HostBuffer> kept(1024 * kMiB);
  HostBuffer x, r;
  ASSERT_TRUE(kept.Fit(kX, kMiB, &x).ok());
  void* x_at = x.get();
  ASSERT_TRUE(kept.Fit(kX, 8 * kMiB, &x).ok());  // x's 1 MiB buffer is kept
  ASSERT_TRUE(kept.Fit(kR, kMiB, &r).ok());      // r does not get it
  EXPECT_NE(r.get(), x_at);
}

TEST_F(KeptBuffersTest, FreesTheLeastRecentlyUsedPastTheBudget) {
  KeptBuffers<HostBuffer> kept(10 * kMiB);
  HostBuffer x;
  for (std::size_t mib : {4, 8, 12, 16}) ASSERT_TRUE(kept.Fit(kX, mib * kMiB, &x).ok());
  // Past the budget the oldest go first, and 12 alone is over it: nothing kept.
  EXPECT_EQ(kept.kept_bytes(), 0u);
  KeptBuffers<HostBuffer> roomy(20 * kMiB);
  HostBuffer y;
  for (std::size_t mib : {4, 8, 12, 16}) ASSERT_TRUE(roomy.Fit(kX, mib * kMiB, &y).ok());
  EXPECT_EQ(roomy.kept_bytes(), 20 * kMiB);  // 12 and 8; 4, the oldest, freed
  EXPECT_EQ(roomy.kept_count(), 2u);
  EXPECT_EQ(HostBuffer::live_bytes, 52 * kMiB);  // the kept 20, and x's and y's 16 in use
}

TEST_F(KeptBuffersTest, WhenMemoryRunsOutTheKeptBuffersAreFreedAndItTriesAgain) {
  KeptBuffers<HostBuffer> kept(1024 * kMiB);
  HostBuffer x;
  ASSERT_TRUE(kept.Fit(kX, 40 * kMiB, &x).ok());
  ASSERT_TRUE(kept.Fit(kX, 30 * kMiB, &x).ok());  // 40 kept, 30 in use
  HostBuffer::limit_bytes = 100 * kMiB;
  // 70 MiB fit only once the kept 40 and the slot's 30 are gone.
  ASSERT_TRUE(kept.Fit(kX, 70 * kMiB, &x).ok());
  EXPECT_EQ(x.bytes(), 70 * kMiB);
  EXPECT_EQ(kept.kept_bytes(), 0u);
  EXPECT_EQ(HostBuffer::live_bytes, 70 * kMiB);
  // Past what the device holds: the allocator's error, nothing kept, the slot empty.
  absl::Status s = kept.Fit(kX, 200 * kMiB, &x);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(HostBuffer::live_bytes, 0u);
}

}  // namespace
}  // namespace kerneleval::server
