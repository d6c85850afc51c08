#!/usr/bin/env bash
# Runs on the GPU machine from the repository root with bundle/gpu (scripts/gpu-bundle.sh):
# device isolation on cuda:0. The GPU service tests in both isolations (with the sticky
# fault test), the h2048 suite through a server with the device in this process and with
# it in a device host, side by side in one run (cold with CUPTI, graph replay with events),
# repeated sticky CUDA faults through the CLI with the time until readiness returns, and
# the RPC overhead against a bare echo in both isolations. Results go to $OUT (or
# ./gpu-results); isolation.md there is the entry for docs/results/.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
source scripts/gpu-env.sh
log="$out/isolation.md"
: >"$log"

section "Machine"
say '```'
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv 2>&1 | tee -a "$log"
say '```'

section "GPU service tests (InProcess and DeviceHost)"
"$bin/service_gpu_test" --gtest_brief=1 >"$out/service_gpu_test.log" 2>&1
say "- service_gpu_test: exit $? ($(grep -E '^\[  (PASSED|FAILED)' "$out/service_gpu_test.log" | tr '\n' ' '))"
grep -E 'FAILED|Failure' "$out/service_gpu_test.log" | head -20 | tee -a "$log"

start_server() {  # name, then server flags; sets port, pid, cli
  local name=$1
  shift
  rm -f "$out/$name.ports.json"
  "$bin/kerneleval-server" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --device cuda:0 \
    --suites-dir suites --port-file "$out/$name.ports.json" "$@" \
    2> >(while IFS= read -r line; do printf '%s %s\n' "$(date +%T.%3N)" "$line"; done >"$out/$name.server.log") &
  pid=$!
  for _ in $(seq 1 600); do [ -s "$out/$name.ports.json" ] && break; sleep 0.1; done
  port=$(sed -E 's/.*"grpc_port": *([0-9]+).*/\1/' "$out/$name.ports.json")
  cli=("$bin/kerneleval" --target "127.0.0.1:$port" --deadline 600)
  for _ in $(seq 1 600); do "${cli[@]}" health --service readiness >/dev/null 2>&1 && break; sleep 0.1; done
}
stop_server() {
  kill -TERM "$pid"
  wait "$pid"
  say "- server exit after SIGTERM: $?; device host processes left: $(pgrep -c -f kerneleval-device-host)"
}

section "h2048 suite, device in the server process vs in a device host (same run)"
for iso in thread process; do
  start_server "cold-$iso" --device-isolation "$iso"
  say "- $iso: server pid $pid, device hosts: $(pgrep -c -f kerneleval-device-host)"
  bench "h2048_cold_$iso" --suite fused_add_rmsnorm_h2048 --device cuda:0 --cold --repetitions 100
  stop_server
done
for iso in thread process; do
  start_server "graph-$iso" --device-isolation "$iso" --disable-cupti
  bench "h2048_graph_$iso" --suite fused_add_rmsnorm_h2048 --device cuda:0 --graph --graph-calls 50 --hot --repetitions 50
  stop_server
done

section "Run's reported latency: one event-timed call (the default) against CUPTI and 100 calls"
start_server runlat
say '```'
for b in 1 79 16254; do
  for flags in "" "--timer cupti" "--repetitions 100" "--repetitions 100 --timer cupti"; do
    # shellcheck disable=SC2086
    say "B=$b ${flags:-(default)}: $("${cli[@]}" run --device cuda:0 --batch "$b" --hidden 2048 $flags 2>&1 | grep -E '^(median|timer)' | tr -s ' ' | tr '\n' ' ')"
  done
done
say '```'
stop_server

section "Sticky CUDA fault, three times, device host isolation (the default for GPUs)"
start_server fault --enable-fault-injection
say '```'
for round in 1 2 3; do
  t0=$(date +%s.%N)
  say "$(date +%T.%3N) round $round: fault call"
  "${cli[@]}" run --device cuda:0 --impl fault_illegal_address --batch 4 --hidden 2048 2>&1 | tee -a "$log"
  say "$(date +%T.%3N) round $round: fault run exit ${PIPESTATUS[0]}; readiness right after: $("${cli[@]}" health --service readiness 2>&1)"
  for _ in $(seq 1 1200); do "${cli[@]}" health --service readiness >/dev/null 2>&1 && break; sleep 0.05; done
  t1=$(date +%s.%N)
  say "round $round: readiness SERVING again $(python3 -c "print(f'{$t1-$t0:.2f}')") s after the fault call started"
  "${cli[@]}" run --device cuda:0 --batch 79 --hidden 2048 --check --repetitions 10 2>&1 | grep -E 'correctness|median' | tee -a "$log"
done
say '```'
say "Server log:"
say '```'
tee -a "$log" <"$out/fault.server.log"
say '```'
stop_server

section "RPC overhead against a bare gRPC echo on cuda:0 (rpc_overhead_bench)"
# Run's default timer on a GPU is CUDA events; --disable-cupti also detaches CUPTI.
for iso in thread process; do
  for cupti in "" --disable-cupti; do
    say '```'
    "$bin/rpc_overhead_bench" --device cuda:0 --isolation "$iso" --device-host "$bin/kerneleval-device-host" \
      --small-iterations 2000 --large-iterations 12 $cupti 2>&1 | tee -a "$log"
    say '```'
  done
done
# One archive: the device call returns a handful of files.
tar -C "$out" -czf "$out/isolation-logs.tgz" --exclude=isolation-logs.tgz --exclude=isolation.md .
find "$out" -mindepth 1 -maxdepth 1 ! -name isolation.md ! -name isolation-logs.tgz -exec rm -rf {} +
