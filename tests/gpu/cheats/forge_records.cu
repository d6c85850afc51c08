// Cheat: leaves the first half of the rows unwritten on every checked call but the last, and
// wipes the check records (all zero reads as "passed"): its own before its check ran, and
// the earlier calls' findings before the service read them. Honest on the last call, whose
// record alone would then be left to judge. A real kernel would have to find the records in
// its context; here the test plants their address at the start of the scratch buffer
// (call_checks_gpu_test.cc, SetCheckRecordsHookForTesting), and a ticket counter after it.
// Caught by: each record reset after its call has finished and read back before the next
// call runs (server/cuda/check_record_ledger.h).
struct ForgePlant {
  unsigned char* records;  // null until the test plants it (the result call)
  unsigned long long records_bytes;
  unsigned long long records_count;
  unsigned long long ticket;  // one per CTA of every call since the plant
};

extern "C" __global__ void __launch_bounds__(1024) forge_records(const kerneleval_params p) {
  ForgePlant* plant = static_cast<ForgePlant*>(p.scratch);
  const long long row = blockIdx.x;
  __shared__ unsigned long long call;
  if (threadIdx.x == 0) {
    call = plant->records != nullptr ? atomicAdd(&plant->ticket, 1ull) / gridDim.x : ~0ull;
  }
  __syncthreads();
  const bool planted = plant->records != nullptr;
  const bool honest = !planted || call + 1 >= plant->records_count;
  if (honest || row >= p.batch / 2) HonestRow(p, row);
  if (!planted || row != 0) return;
  for (unsigned long long i = threadIdx.x; i < plant->records_bytes; i += blockDim.x) {
    plant->records[i] = 0;
  }
}
