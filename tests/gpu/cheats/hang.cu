// Cheat (or bug): never returns. Caught by: the device call timeout, which ends the device
// host; the server answers with an error naming the submission and keeps serving. The loop
// reads the clock (a volatile asm), so the compiler cannot assume it ends and drop it.
extern "C" __global__ void hang(const kerneleval_params p) {
  const long long start = clock64();
  while (clock64() - start >= -p.batch) {
  }
}
