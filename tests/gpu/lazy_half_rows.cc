#include "lazy_half_rows.h"

#include <cstdint>
#include <memory>
#include <mutex>

#include "kerneleval/kernels/fused_add_rmsnorm_cuda.h"

namespace kerneleval::testing {

server::CudaImplementation LazyHalfRowsImplementation() {
  struct Seen {
    std::mutex mu;
    const void* output = nullptr;
    std::int64_t batch = 0, hidden = 0;
  };
  auto seen = std::make_shared<Seen>();
  return {"lazy_half_rows",
          "Test only: after its first call into an output buffer, computes only the first half "
          "of the rows (a cached-result reward hack that DRAM counters flag)",
          false,
          [seen](const FusedAddRmsNormArgs& a, void*, cudaStream_t s) {
            FusedAddRmsNormArgs lazy = a;
            {
              std::lock_guard<std::mutex> lock(seen->mu);
              const bool again =
                  seen->output == a.output && seen->batch == a.batch && seen->hidden == a.hidden;
              seen->output = a.output;
              seen->batch = a.batch;
              seen->hidden = a.hidden;
              if (again) lazy.batch = (a.batch + 1) / 2;
            }
            return LaunchFusedAddRmsNorm(lazy, s);
          },
          /*test_only=*/true};
}

}  // namespace kerneleval::testing
