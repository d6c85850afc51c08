// Cheat (or bug): writes through an invalid address, a sticky CUDA fault. Caught by: the
// device host ends and is replaced; the server answers with an error naming the submission.
extern "C" __global__ void fault(const kerneleval_params p) {
  *reinterpret_cast<volatile float*>(0x10) = static_cast<float>(p.batch);
}
