#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, after scripts/gpu-bundle.sh: three
# back-to-back cold runs of both suites on a server as it starts by default, compared
# workload by workload (the 2% repeatability target). repeatability.md in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-env.sh
log="$out/repeatability.md"
: >"$log"
rm -f "$out/ports-rep.json"
"$bin/kerneleval-server" --listen 127.0.0.1:0 --metrics-listen "" --device cuda:0 \
  --suites-dir suites --port-file "$out/ports-rep.json" 2>"$out/server-repeatability.log" &
server_pid=$!
for _ in $(seq 1 600); do [ -s "$out/ports-rep.json" ] && break; sleep 0.1; done
port=$(sed -E 's/.*"grpc_port": *([0-9]+).*/\1/' "$out/ports-rep.json")
cli=("$bin/kerneleval" --target "127.0.0.1:$port" --deadline 600)
for _ in $(seq 1 600); do "${cli[@]}" health --service readiness >/dev/null 2>&1 && break; sleep 0.2; done
section "Three back-to-back cold runs (NVML read only before and after the timed samples)"
# REPEATABILITY_REPS and LIGER_REPS: the timed calls per workload of the h2048 suite
# (default 100) and of the Liger sweep (default 30).
for i in 1 2 3; do
  bench "rep_h2048_$i" --suite fused_add_rmsnorm_h2048 --cold --repetitions "${REPEATABILITY_REPS:-100}"
done
for i in 1 2 3; do bench "rep_liger_$i" --suite liger_fused_add_rmsnorm --cold --repetitions "${LIGER_REPS:-30}"; done
for suite in h2048 liger; do
  say ""
  say '```'
  python3 scripts/compare_reports.py run1="$out/rep_${suite}_1.json" run2="$out/rep_${suite}_2.json" \
    run3="$out/rep_${suite}_3.json" | tee -a "$log"
  say '```'
done
kill -TERM "$server_pid"
wait "$server_pid"
