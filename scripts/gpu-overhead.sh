#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, after scripts/gpu-bundle.sh: what the
# service itself costs around a kernel, and how its numbers repeat.
#   1. GPU tests: kernels, the service in both isolations, the checks of submitted calls.
#   2. rpc_overhead_bench: a B = 1 Run against a bare gRPC echo, hop by hop, and a 200 MB
#      Run, with the device in the server process and in a device host.
#   3. The built-in written as a submission (examples/submissions/fused_rows_vec16.cu) with
#      and without PDL, and with its row dispatch removed (tests/gpu/submission_gap), beside
#      cuda_fused: h2048, graph replay and cold.
#   4. Three back-to-back cold runs of both suites (scripts/gpu-repeatability.sh).
# overhead.md and repeatability.md in $OUT, the reports and logs in overhead-logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-env.sh
log="$out/overhead.md"
: >"$log"

machine_section

section "GPU tests"
for t in kernels_gpu_test service_gpu_test call_checks_gpu_test submission_launcher_gpu_test; do
  timeout 300 "$bin/$t" --gtest_brief=1 >"$out/$t.log" 2>&1
  say "- $t: exit $? ($(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$out/$t.log" | tr '\n' ' '))"
  grep -E '^\[  FAILED|Failure|Expected|Which is' "$out/$t.log" | head -n 12 | sed 's/^/    /' |
    tee -a "$log"
done

section "RPC overhead against a bare gRPC echo on cuda:0 (rpc_overhead_bench)"
for iso in thread process; do
  say '```'
  "$bin/rpc_overhead_bench" --device cuda:0 --isolation "$iso" \
    --device-host "$bin/kerneleval-device-host" --small-iterations 2000 --large-iterations 5 2>&1 |
    tee -a "$log"
  say '```'
done

section "The built-in written as a submission: where its gap at small batches comes from"
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
submit without_pdl "$ex" --entry 'fused_rows_vec16<0>' "${row[@]}"
cat "$ex" tests/gpu/submission_gap/direct_rows.cu >"$out/direct_rows.cu"
submit direct_rows "$out/direct_rows.cu" --entry 'direct_rows<0>' "${row[@]}" --pdl
gap=(--suite fused_add_rmsnorm_h2048 --impl cuda_fused --impl as_shipped --impl without_pdl
     --impl direct_rows)
bench gap_graph "${gap[@]}" --graph --graph-calls 50 --hot --repetitions 50
bench gap_cold "${gap[@]}" --cold --repetitions 50
stop_server

bash scripts/gpu-repeatability.sh

tar -C "$out" -czf "$out/overhead-logs.tgz" --exclude=overhead-logs.tgz --exclude=overhead.md \
  --exclude=repeatability.md .
find "$out" -mindepth 1 -maxdepth 1 ! -name overhead.md ! -name repeatability.md \
  ! -name overhead-logs.tgz -exec rm -rf {} +
