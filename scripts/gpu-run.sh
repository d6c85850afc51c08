#!/usr/bin/env bash
# Runs on the GPU machine from the repository root (or any folder holding scripts/, suites/
# and bundle/gpu from scripts/gpu-bundle.sh): the GPU tests, the project's benchmark through
# the real server and client, and the peers, all in one run. Results go to $OUT (or
# ./gpu-results); results.md there is the entry for docs/results/.
#
#   1. GPU tests (kernels_gpu_test, service_gpu_test, tenants_gpu_test).
#   2. A server as it starts by default (CUPTI available): graph replay, three back-to-back
#      cold runs of both suites, DRAM bytes of both suites with the test-only lazy
#      implementation beside the fused kernel, events-timed cold, the fault and recovery.
#   3. The same binary with --disable-cupti: graph replay, to compare with 2.
#   4. The kernel microbenchmark and the peers (torch eager / compile, Liger, FlashInfer).
#   5. Nsight Compute: time and DRAM bytes of the fused kernel, an independent count.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-env.sh
log="$out/results.md"
: >"$log"

machine_section

section "GPU tests"
for t in kernels_gpu_test service_gpu_test tenants_gpu_test; do
  timeout 300 "$bin/$t" --gtest_brief=1 >"$out/$t.log" 2>&1
  say "- $t: exit $? ($(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$out/$t.log" | tr '\n' ' '))"
  grep -E '^\[  FAILED|^\[  SKIPPED|Skipped|counters unavailable' "$out/$t.log" | head -n 8 | sed 's/^/    /' | tee -a "$log"
done

compare() {  # title, then LABEL=report.json ...
  say ""
  say "#### $1"
  shift
  say '```'
  python3 scripts/compare_reports.py "$@" | tee -a "$log"
  say '```'
}

h2048=(--suite fused_add_rmsnorm_h2048)
liger=(--suite liger_fused_add_rmsnorm)
graph=(--graph --graph-calls 50 --hot --repetitions 50)

section "A default server (CUPTI available, attached only for windows that ask for it)"
# The planted device host: the server with lazy_half_rows beside the built-ins (tests/gpu).
start_server default --enable-fault-injection --device-host "$bin/kerneleval-planted-device-host" \
  --telemetry-seconds 1
"${cli[@]}" devices | tee -a "$log"
bench h2048_graph "${h2048[@]}" "${graph[@]}"
# An idle spell first, so that the first workload's admission starts from a resting clock.
sleep 20
# 1000 calls: with fewer, the median of a 1.6 us kernel moves by a 32 ns step (2%) between
# runs (docs/results/measurement-h200.md).
for i in 1 2 3; do bench "h2048_cold_$i" "${h2048[@]}" --cold --repetitions 1000; done
for i in 1 2 3; do bench "liger_cold_$i" "${liger[@]}" --cold --repetitions 1000; done
bench h2048_dram "${h2048[@]}" --cold --repetitions 30 --measure-dram-bytes \
  --impl cuda_fused --impl lazy_half_rows
bench liger_dram "${liger[@]}" --cold --repetitions 10 --measure-dram-bytes
bench h2048_graph_rotate_dram "${h2048[@]}" "${graph[@]}" --rotate --measure-dram-bytes
bench h2048_events "${h2048[@]}" --cold --timer events --repetitions 100
bench h2048_graph_after "${h2048[@]}" "${graph[@]}"

section "Device fault and recovery (test-only fault injection)"
say '```'
"${cli[@]}" run --device cuda:0 --impl fault_illegal_address --batch 4 --hidden 2048 2>&1 | tee -a "$log"
say "fault run exit: ${PIPESTATUS[0]}"
for i in $(seq 1 100); do
  "${cli[@]}" health --service readiness >/dev/null 2>&1 && { say "readiness SERVING again after ~$((i / 5)) s"; break; }
  sleep 0.2
done
"${cli[@]}" run --device cuda:0 --batch 79 --hidden 2048 --check --repetitions 10 2>&1 | tee -a "$log"
say "run after recovery exit: ${PIPESTATUS[0]}"
say '```'
curl -s "127.0.0.1:$mport/metrics" >"$out/metrics.txt" 2>/dev/null ||
  python3 -c "import urllib.request,sys;sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:$mport/metrics').read().decode())" >"$out/metrics.txt"
say "- metrics scrape: $(grep -c '^kerneleval_gpu_' "$out/metrics.txt") kerneleval_gpu_* series"
stop_server

section "The same binary with --disable-cupti"
start_server nocupti --disable-cupti
bench h2048_graph_nocupti "${h2048[@]}" "${graph[@]}"
stop_server

section "The same binary, NVML read only before and after each measurement (KERNELEVAL_CLOCK_SAMPLE_MS=0)"
KERNELEVAL_CLOCK_SAMPLE_MS=0 start_server nosample
bench h2048_cold_nosample "${h2048[@]}" --cold --repetitions 1000
stop_server

section "Comparisons"
compare "graph replay: default server (before and after its CUPTI windows) vs --disable-cupti" \
  default="$out/h2048_graph.json" nocupti="$out/h2048_graph_nocupti.json"
compare "graph replay on the default server: before vs after CUPTI windows and DRAM counters" \
  before="$out/h2048_graph.json" after="$out/h2048_graph_after.json"
compare "h2048 cold, three back-to-back runs" \
  run1="$out/h2048_cold_1.json" run2="$out/h2048_cold_2.json" run3="$out/h2048_cold_3.json"
compare "h2048 cold: NVML sampled every 10 ms while timing vs only before and after" \
  sampled="$out/h2048_cold_3.json" unsampled="$out/h2048_cold_nosample.json"
compare "liger cold, three back-to-back runs" \
  run1="$out/liger_cold_1.json" run2="$out/liger_cold_2.json" run3="$out/liger_cold_3.json"

section "Kernel microbenchmark and peers (same shapes, same flushes, spin before every start event)"
say '```'
timeout 120 "$bin/kerneleval-kernel-bench" --flush=read 2>&1 | tee -a "$log"
flashinfer_lib="$bundle/lib/libkerneleval_flashinfer.so"
PYTHONUNBUFFERED=1 timeout 420 python3 scripts/torch_peers.py --json "$out/peers.json" \
  $([ -f "$flashinfer_lib" ] && echo --flashinfer-lib "$flashinfer_lib") 2>&1 | tee -a "$log"
say '```'

section "Independent timing and traffic: Nsight Compute (--clock-control none, caches flushed)"
say '```'
if command -v ncu >/dev/null; then
  timeout 240 ncu --clock-control none --cache-control all \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
    --csv "$bin/kerneleval-kernel-bench" --ncu --no-unfused >"$out/ncu.csv" 2>"$out/ncu.err"
  say "exit $?"
  python3 scripts/ncu_summary.py "$out/ncu.csv" | tee -a "$log"
else
  say "ncu not found"
fi
say '```'
