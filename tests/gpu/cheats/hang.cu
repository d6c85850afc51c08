// Cheat (or bug): never returns. Caught by: the device call timeout, which ends the device
// host; the server answers with an error naming the submission and keeps serving.
extern "C" __global__ void hang(const kerneleval_params p) {
  volatile long long spin = p.batch;
  while (spin > 0) spin = spin + 1;
}
