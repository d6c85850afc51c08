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
# REPEATABILITY_REPS and LIGER_REPS: the timed calls per workload of the h2048 suite and of
# the Liger sweep (default 1000 each: with 300, the median of a 1.6 us kernel moves by a 32 ns
# step between runs; docs/results/measurement-h200.md).
for i in 1 2 3; do
  bench "rep_h2048_$i" --suite fused_add_rmsnorm_h2048 --cold --repetitions "${REPEATABILITY_REPS:-1000}"
done
for i in 1 2 3; do bench "rep_liger_$i" --suite liger_fused_add_rmsnorm --cold --repetitions "${LIGER_REPS:-1000}"; done
compare() {  # title, then compare_reports.py arguments
  say ""
  say "#### $1"
  shift
  say '```'
  python3 scripts/compare_reports.py "$@" | tee -a "$log"
  say '```'
}
for suite in h2048 liger; do
  runs=(run1="$out/rep_${suite}_1.json" run2="$out/rep_${suite}_2.json" run3="$out/rep_${suite}_3.json")
  compare "$suite" "${runs[@]}"
done

# PLACEMENT_RUNS=N (default 0, skipped): whether a run-level shift follows where a run's
# buffers land or what ran on the device before it. Liger's hidden 1024 alone, N cold runs
# in each arm of PLACEMENT_ARMS (default all):
#   kept     back to back: the buffers kept from run to run;
#   heavy    the buffers kept, but another process moves ~10 GB through DRAM between runs
#            (kerneleval-kernel-bench at hidden 16384 fp32);
#   tiny     each run after a 1-row run, which makes the next run allocate its buffers anew
#            without heavy traffic;
#   big      each run after a hidden-16384 run: new buffers and heavy traffic;
#   rotated  as big, with --rotate (each call on one of several input sets).
placement_runs=${PLACEMENT_RUNS:-0}
if [ "$placement_runs" -gt 0 ]; then
  section "Where a run-level shift comes from: Liger hidden 1024, $placement_runs runs each way"
  python3 - "$out" <<'PY'
import json, sys
liger = json.load(open("suites/liger_fused_add_rmsnorm.json"))
for width in (1024, 16384):
    one = dict(liger, name=f"liger_h{width}", workloads=[{"axes": {"hidden_size": width}}])
    json.dump(one, open(f"{sys.argv[1]}/liger_h{width}.json", "w"))
h2048 = json.load(open("suites/fused_add_rmsnorm_h2048.json"))
one_row = dict(h2048, name="one_row", workloads=[h2048["workloads"][0]])
json.dump(one_row, open(f"{sys.argv[1]}/one_row.json", "w"))
PY
  quiet() {  # name, then bench flags
    local name=$1
    shift
    "${cli[@]}" bench "$@" --format json --out "$out/$name.json" >/dev/null 2>"$out/$name.err"
  }
  h1024=(--suite-file "$out/liger_h1024.json" --cold --repetitions "${LIGER_REPS:-1000}")
  before_run() {  # arm, run
    case $1 in
      heavy) "$bin/kerneleval-kernel-bench" --dtype=fp32 --mode=output_and_residual --hidden=16384 \
        --batches=2048 --reps=40 --no-unfused >"$out/place_heavy_bench_$2.log" 2>&1 ;;
      tiny) quiet "place_before_tiny_$2" --suite-file "$out/one_row.json" --cold --repetitions 3 ;;
      big | rotated) quiet "place_before_$1_$2" --suite-file "$out/liger_h16384.json" --cold \
        --repetitions 3 ;;
    esac
  }
  for arm in ${PLACEMENT_ARMS:-kept heavy tiny big rotated}; do
    runs=()
    for i in $(seq 1 "$placement_runs"); do
      before_run "$arm" "$i"
      extra=()
      [ "$arm" = rotated ] && extra=(--rotate)
      quiet "place_${arm}_$i" "${h1024[@]}" "${extra[@]}"
      runs+=("run$i=$out/place_${arm}_$i.json")
    done
    compare "$arm" "${runs[@]}"
  done
fi
kill -TERM "$server_pid"
wait "$server_pid"
