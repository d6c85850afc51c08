#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, after scripts/gpu-bundle.sh: what the
# service itself costs around a kernel, and how its numbers repeat.
#   1. GPU tests: kernels, the service in both isolations, the checks of submitted calls.
#   2. rpc_overhead_bench: a B = 1 Run against a bare gRPC echo, hop by hop, and a 200 MB
#      Run, with the device in the server process and in a device host.
#   3. The built-in written as a submission (examples/submissions/fused_rows_vec16.cu, which
#      takes the ABI's flags), a leaner entry with and without a read of `flags`, and the
#      example's fast path alone (tests/gpu/submission_gap) beside cuda_fused: h2048, graph
#      replay and cold, then again with the built-in's calls checked too (--check-every-call;
#      GAP_CHECKED= skips that). GAP_REPS timed calls per workload (default 100).
#   4. launch_path_bench: the lean row kernel of step 3 built by nvcc or NVRTC, launched
#      through the runtime, a module's CUfunction or a library's CUkernel, from the ABI's
#      parameter block or a 56-byte one, beside cuda_fused in graph replay (LAUNCH_SAMPLES
#      replays per variant, default 300): which part of the submission path costs time.
#   5. Three back-to-back cold runs of both suites (scripts/gpu-repeatability.sh; with
#      PLACEMENT_RUNS, also its runs that tell placement from what ran before).
# OVERHEAD_STEPS="tests rpc gap launch repeat" (the default) picks steps; REPEATABILITY_REPS
# and LIGER_REPS set the suites' timed calls per workload in step 5.
# overhead.md and repeatability.md in $OUT, the reports and logs in overhead-logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-env.sh
log="$out/overhead.md"
: >"$log"

machine_section
# OVERHEAD_STEPS picks the steps (default: all of them).
want() { [[ " ${OVERHEAD_STEPS:-tests rpc gap launch repeat} " == *" $1 "* ]]; }

if want tests; then
section "GPU tests"
export KERNELEVAL_COMPILE_TOOL="$PWD/$bin/kerneleval-compile" KERNELEVAL_EXAMPLES_DIR="$PWD/examples/submissions"
for t in kernels_gpu_test service_gpu_test call_checks_gpu_test submission_launcher_gpu_test; do
  timeout 300 "$bin/$t" --gtest_brief=1 >"$out/$t.log" 2>&1
  say "- $t: exit $? ($(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$out/$t.log" | tr '\n' ' '))"
  grep -E '^\[  FAILED|Failure|Expected|Which is' "$out/$t.log" | head -n 12 | sed 's/^/    /' |
    tee -a "$log"
done

fi

if want rpc; then
section "RPC overhead against a bare gRPC echo on cuda:0 (rpc_overhead_bench)"
# How a small Run reaches the device, side by side in one run: the worker sleeping on its
# queue, the worker polling it for a while after a job (the default on this many cores); with
# a device host, its link polled or not.
rpc() {  # title, then rpc_overhead_bench flags
  local title=$1
  shift
  say "#### $title"
  say '```'
  "$bin/rpc_overhead_bench" --device cuda:0 --device-host "$bin/kerneleval-device-host" \
    --small-iterations "${RPC_SMALL:-2000}" --large-iterations 3 "$@" 2>&1 | tee -a "$log"
  say '```'
}
rpc "thread, worker sleeps" --isolation thread --no-worker-spin
rpc "thread, worker polls (default)" --isolation thread
KERNELEVAL_DEVICE_LINK_SPIN_US=0 rpc "process, nothing polls" --isolation process --no-worker-spin
rpc "process, worker and link poll (default)" --isolation process
fi

if want gap; then
section "The built-in written as a submission, with the ABI's flags, each side checked or not"
start_server gap --submissions --cuda-include-dir /usr/local/cuda/include \
  --compile-tool "$bin/kerneleval-compile" --device-call-timeout-seconds 20
submit() {  # name, source, then submit flags
  local name=$1 source=$2
  shift 2
  say "- submit $name: $("${cli[@]}" submit --source "$source" --name "$name" "$@" 2>&1 |
    tr '\n' ' ' | cut -c1-300)"
}
ex=examples/submissions/fused_rows_vec16.cu
row=(--block 128 --rows-per-block 1 --dtype bf16)
submit as_shipped "$ex" --entry 'fused_rows_vec16<0>' "${row[@]}" --pdl
cat "$ex" tests/gpu/submission_gap/direct_rows.cu tests/gpu/submission_gap/early_prologue_rows.cu \
  >"$out/direct_rows.cu"
gap=(--suite fused_add_rmsnorm_h2048 --impl cuda_fused --impl as_shipped)
# The lean entry without and with a read of `flags`, the example's fast path alone
# (GAP_PROBES: these entries of direct_rows.cu or early_prologue_rows.cu, no spaces in a
# name, e.g. 'early_rows<0,2>'; set empty for the example alone); then the
# built-in's calls checked too (GAP_CHECKED, on unless set empty).
for entry in ${GAP_PROBES-'lean_rows_probe<0>' 'lean_rows_probe<2>' 'flat_rows<0>'}; do
  name=${entry//</_}
  name=${name//>/}
  name=${name//,/_}
  submit "$name" "$out/direct_rows.cu" --entry "$entry" "${row[@]}" --pdl
  gap+=(--impl "$name")
done
reps=(--repetitions "${GAP_REPS:-100}")
bench gap_graph "${gap[@]}" --graph --graph-calls 50 --hot "${reps[@]}"
bench gap_cold "${gap[@]}" --cold "${reps[@]}"
if [ -n "${GAP_CHECKED-1}" ]; then
  bench gap_graph_checked "${gap[@]}" --graph --graph-calls 50 --hot "${reps[@]}" --check-every-call
  bench gap_cold_checked "${gap[@]}" --cold "${reps[@]}" --check-every-call
fi
stop_server
fi

if want launch; then
section "A submitted row kernel's launch paths against cuda_fused (launch_path_bench)"
say '```'
"$bin/launch_path_bench" --source-dir . --samples "${LAUNCH_SAMPLES:-300}" \
  --cubin-out "$out/launch_path_nvrtc.cubin" 2>&1 | tee -a "$log"
say '```'
# Both builds' machine code, where the GPU machine's toolkit can show it.
if [ -x /usr/local/cuda/bin/cuobjdump ]; then
  /usr/local/cuda/bin/cuobjdump -sass "$out/launch_path_nvrtc.cubin" >"$out/launch_path_nvrtc.sass" 2>&1
  /usr/local/cuda/bin/cuobjdump -sass -arch sm_90a "$bin/launch_path_bench" \
    >"$out/launch_path_nvcc.sass" 2>&1
fi
fi

want repeat && bash scripts/gpu-repeatability.sh

tar -C "$out" -czf "$out/overhead-logs.tgz" --exclude=overhead-logs.tgz --exclude=overhead.md \
  --exclude=repeatability.md .
find "$out" -mindepth 1 -maxdepth 1 ! -name overhead.md ! -name repeatability.md \
  ! -name overhead-logs.tgz -exec rm -rf {} +
