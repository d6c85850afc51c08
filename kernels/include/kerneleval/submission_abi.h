/* The ABI of a submitted kernel: what every kernel of a submission's launch plan receives.
 *
 * A submitted kernel is a __global__ function with exactly one parameter, this struct by
 * value:
 *
 *   #include <kerneleval/submission_abi.h>
 *   extern "C" __global__ void my_kernel(const kerneleval_params p) { ... }
 *
 * It computes, for every row b < batch (see kerneleval/kernels/fused_add_rmsnorm.h):
 *   s            = hidden_states[b] + residual[b]                 (fp32)
 *   output[b]    = s * rsqrt(mean(s^2) + eps) * weight            (rounded once to the dtype)
 *   residual_out[b] = s                                           (rounded once; not in OUTPUT)
 *
 * Element (b, i) of a tensor is at `ptr + b * stride + i` in elements of the dtype. Pointers
 * are device memory of the device the kernel runs on, aligned to at least 16 bytes at row 0.
 * Kernels must use the strides unless `flags` promises what they may assume instead: the
 * service sets KERNELEVAL_FLAG_ROWS_ALIGNED16 and KERNELEVAL_FLAG_INDEX32 for each call from
 * that call's pointers and shapes, so one uniform branch on them can replace the per-thread
 * checks a general kernel would make before its first load.
 * In OUTPUT mode the inputs must be left unchanged and residual_out is NULL; in IN_PLACE mode
 * output == hidden_states and residual_out == residual.
 *
 * Plain C, no includes: the same text compiles in NVRTC (served as a virtual include), in
 * nvcc and in a host C or C++ compiler. Field order and sizes are the contract: the layout
 * is fixed at KERNELEVAL_PARAMS_BYTES bytes, and a change bumps KERNELEVAL_ABI_VERSION and the
 * size with it, so that a kernel compiled against another version is refused at load, never
 * run on a block it misreads. Version 1 (128 bytes) had no flags and the strides first;
 * version 2 (136 bytes) had batch and hidden at offsets 48 and 56, which cost every call
 * ~0.03 us on an H200 (below); version 3 (144 bytes) moved them, flags and eps into the
 * first 48 bytes and added inv_hidden there. The field names and types are those of version
 * 2: a kernel written for it compiles unchanged.
 */
#ifndef KERNELEVAL_SUBMISSION_ABI_H_
#define KERNELEVAL_SUBMISSION_ABI_H_

#define KERNELEVAL_ABI_VERSION 3
#define KERNELEVAL_PARAMS_BYTES 144

/* Values of kerneleval_params.dtype: the storage type of every tensor. */
#define KERNELEVAL_DTYPE_BF16 0 /* __nv_bfloat16 */
#define KERNELEVAL_DTYPE_FP16 1 /* __half */
#define KERNELEVAL_DTYPE_FP32 2 /* float */

/* Bits of kerneleval_params.flags: promises about this call, set only where they hold. */
/* Every stride equals hidden, and every row of every tensor (scratch included) starts on a
 * 16-byte boundary: 16-byte vectors over hidden * sizeof(dtype) / 16 per row, at
 * `ptr + b * hidden`, with no alignment or stride checks. */
#define KERNELEVAL_FLAG_ROWS_ALIGNED16 0x1u
/* batch * hidden < 2^31: every element offset fits in a signed 32-bit int. */
#define KERNELEVAL_FLAG_INDEX32 0x2u

/* Values of kerneleval_params.mode. */
#define KERNELEVAL_MODE_OUTPUT 0              /* writes output only */
#define KERNELEVAL_MODE_OUTPUT_AND_RESIDUAL 1 /* writes output and residual_out */
#define KERNELEVAL_MODE_IN_PLACE 2            /* residual <- s, hidden_states <- output */

typedef struct kerneleval_params {
  /* What a row kernel reads before its first load, and what it needs the moment its
   * reduction ends, comes first, in the first 48 bytes. A kernel's parameters live in its
   * constant bank from offset 0x210; each 64-byte line is fetched at its first read, and
   * 0x200-0x23f holds the memory descriptor every load uses (0x208) and these 48 bytes, so
   * one fetch serves them all. A line's first read costs ~0.03 us per call on an H200 where
   * the kernel waits for it; read before griddepcontrol.wait, it overlaps the kernel before
   * (docs/submissions.md, docs/results/submissions-h200.md). */
  const void* hidden_states; /* [batch, hidden] */
  const void* residual;      /* [batch, hidden] */
  long long batch;
  long long hidden;
  unsigned int flags; /* KERNELEVAL_FLAG_*: what this call promises */
  float eps;
  float inv_hidden; /* 1.0f / hidden, rounded once, as the built-in kernels use it */
  int mode;         /* KERNELEVAL_MODE_* */
  /* Read while loads are in flight, or at the stores. */
  const void* weight; /* [hidden] */
  void* output;       /* [batch, hidden]; == hidden_states in IN_PLACE */
  void* residual_out; /* [batch, hidden]; NULL in OUTPUT; == residual in IN_PLACE */
  int dtype;          /* KERNELEVAL_DTYPE_* */
  int sm_count;       /* SMs of the device: persistent kernels size their loops with it */
  void* scratch;      /* [batch, hidden] of the dtype when the plan asks; else NULL */
  long long hidden_states_stride; /* elements between rows */
  long long residual_stride;
  long long output_stride;
  long long residual_out_stride; /* 0 when residual_out is NULL */
  long long scratch_bytes;       /* 0 without scratch */
  int kernel_index;              /* which kernel of the launch plan this launch is, from 0 */
  int num_kernels;               /* kernels in the launch plan */
  int abi_version; /* KERNELEVAL_ABI_VERSION of the service that launched the kernel */
  int reserved;    /* 0 */
} kerneleval_params;

#ifdef __cplusplus
static_assert(sizeof(kerneleval_params) == KERNELEVAL_PARAMS_BYTES,
              "kerneleval_params layout is the ABI");
#endif

#endif /* KERNELEVAL_SUBMISSION_ABI_H_ */
