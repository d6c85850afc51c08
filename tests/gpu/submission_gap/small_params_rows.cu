// Appended after direct_rows.cu by launch_path_bench: lean_rows_probe<0>'s row from a
// parameter block of the seven fields it reads (56 bytes, against kerneleval_params' 136),
// to tell what the block's size costs a launch from what the compiler or the launch path do.
struct lean_params {
  const void* hidden_states;
  const void* residual;
  const void* weight;
  void* output;
  long long batch;
  long long hidden;
  float eps;
};

__global__ void __launch_bounds__(128) lean_rows_small(const lean_params p) { LeanRow<0>(p); }
