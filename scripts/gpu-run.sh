#!/usr/bin/env bash
# Runs on the GPU machine from the repository root with bundle/gpu (scripts/gpu-bundle.sh):
# the GPU tests, the project's benchmark through the real server and client (cold and
# graph protocols, both suites, a back-to-back repeat), Nsight Compute as an independent
# timer, and PyTorch eager / torch.compile on the same shapes. Results go to $OUT (or
# ./gpu-results); results.md there is the entry for docs/results/.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-env.sh
log="$out/results.md"
: >"$log"

section "Machine"
say '```'
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw \
  --format=csv 2>&1 | tee -a "$log"
say '```'

section "GPU tests"
for t in kernels_gpu_test service_gpu_test; do
  "$bin/$t" --gtest_brief=1 >"$out/$t.log" 2>&1
  say "- $t: exit $? ($(grep -E '^\[  (PASSED|FAILED)' "$out/$t.log" | tr '\n' ' '))"
done

section "Benchmarks through the service (kerneleval-server on cuda:0 and every GPU, kerneleval bench)"
"$bin/kerneleval-server" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --device cuda \
  --suites-dir suites --port-file "$out/ports.json" --enable-fault-injection --telemetry-seconds 1 \
  2>"$out/server.log" &
server_pid=$!
for _ in $(seq 1 600); do [ -s "$out/ports.json" ] && break; sleep 0.1; done
port=$(sed -E 's/.*"grpc_port": *([0-9]+).*/\1/' "$out/ports.json")
mport=$(sed -E 's/.*"metrics_port": *([0-9]+).*/\1/' "$out/ports.json")
cli=("$bin/kerneleval" --target "127.0.0.1:$port" --deadline 600)
for _ in $(seq 1 600); do "${cli[@]}" health --service readiness >/dev/null 2>&1 && break; sleep 0.2; done
"${cli[@]}" devices | tee -a "$log"
d0=(--device cuda:0)
bench h2048_cold --suite fused_add_rmsnorm_h2048 "${d0[@]}" --cold --repetitions 100
bench h2048_cold_repeat --suite fused_add_rmsnorm_h2048 "${d0[@]}" --cold --repetitions 100
# Graph replay as the peers measure it (inputs stay in L2 where they fit), and with
# rotation so that large batches stream from HBM on every call.
bench h2048_graph --suite fused_add_rmsnorm_h2048 "${d0[@]}" --graph --graph-calls 50 --hot --repetitions 50
bench h2048_graph_rotate --suite fused_add_rmsnorm_h2048 "${d0[@]}" --graph --graph-calls 50 --hot --rotate --repetitions 50
bench h2048_events --suite fused_add_rmsnorm_h2048 "${d0[@]}" --cold --timer events --repetitions 100
bench liger_cold --suite liger_fused_add_rmsnorm "${d0[@]}" --cold --repetitions 30 --measure-copy
# Every local GPU at once, through the same client path the scheduled CronJob uses.
bench h2048_all_devices --suite fused_add_rmsnorm_h2048 --all-devices --repetitions 30

section "Device fault and recovery (test-only fault injection)"
say '```'
"${cli[@]}" run --device cuda:0 --impl fault_illegal_address --batch 4 --hidden 2048 2>&1 | tee -a "$log"
say "fault run exit: ${PIPESTATUS[0]}"
"${cli[@]}" health --service readiness 2>&1 | tee -a "$log"
for i in $(seq 1 100); do
  "${cli[@]}" health --service readiness >/dev/null 2>&1 && { say "readiness SERVING again after ~$((i / 5)) s"; break; }
  sleep 0.2
done
"${cli[@]}" run --device cuda:0 --batch 79 --hidden 2048 --check --repetitions 10 2>&1 | tee -a "$log"
say "run after recovery exit: ${PIPESTATUS[0]}"
say '```'
say "- server log: $(grep -c . "$out/server.log") lines; recovery: $(grep 'recovery attempt' "$out/server.log" | tr '\n' ' ')"
curl -s "127.0.0.1:$mport/metrics" >"$out/metrics.txt" 2>/dev/null ||
  python3 -c "import urllib.request,sys;sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:$mport/metrics').read().decode())" >"$out/metrics.txt"
say "- metrics scrape: $(grep -c '^kerneleval_gpu_' "$out/metrics.txt") kerneleval_gpu_* series"
kill -TERM "$server_pid"
wait "$server_pid"
say "- server exit after SIGTERM: $?"

section "Independent timing: Nsight Compute gpu__time_duration (--clock-control none, caches flushed)"
say '```'
if command -v ncu >/dev/null; then
  ncu --clock-control none --cache-control all --metrics gpu__time_duration.sum \
    --csv "$bin/kerneleval-kernel-bench" --ncu --no-unfused >"$out/ncu.csv" 2>"$out/ncu.err"
  say "exit $?"
  python3 scripts/ncu_summary.py "$out/ncu.csv" | tee -a "$log"
  say "(same, --cache-control none: caches left warm)"
  ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum \
    --csv "$bin/kerneleval-kernel-bench" --ncu --no-unfused >"$out/ncu-warm.csv" 2>/dev/null
  python3 scripts/ncu_summary.py "$out/ncu-warm.csv" | tee -a "$log"
else
  say "ncu not found"
fi
say '```'

section "Kernel microbenchmark and PyTorch peers (same shapes, same protocols)"
say '```'
"$bin/kerneleval-kernel-bench" 2>&1 | tee -a "$log"
PYTHONUNBUFFERED=1 python3 scripts/torch_peers.py --json "$out/torch.json" 2>&1 | tee -a "$log"
say '```'
