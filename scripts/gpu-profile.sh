#!/usr/bin/env bash
# Runs on the GPU machine from the repository root with bundle/gpu (scripts/gpu-bundle.sh):
# kernel profiles (Protocol.profile) through the real server and CLI, set beside Nsight
# Compute's figures for the same kernel. Results go to $OUT (or ./gpu-results); profile.md
# there is the entry for docs/results/.
#   0. `kerneleval submit --suite fused_add_rmsnorm_h2048 --profile` of the fused_rows_vec16
#      example: the verdict and its profile as the submission's author reads them.
#   1. bench --profile of fused_add_rmsnorm_h2048, cold, the built-in beside the test-only
#      lazy_half_rows (planted device host), with DRAM bytes counted too; then hot graph
#      replay with a profile (the profile replays plain calls).
#   2. ncu over kerneleval-kernel-bench --ncu with the metrics the service's profile read
#      (taken from its report) and the figures ncu derives itself (theoretical occupancy,
#      stall ratios), caches flushed per pass as the cold protocol's replays are.
#   3. scripts/profile_vs_ncu.py: each figure of the built-in's profile against ncu's, batch
#      by batch.
#   4. The submissions of the source-line section (the three CUDA examples and the Triton, CuTe
#      DSL and TileLang examples the bundle holds) run once each at B = 79 and 16254 under ncu
#      (attached to the server and its device hosts, CUPTI off in the server), set beside the
#      service's profiles of the same kernels (profile_vs_ncu.py --submissions).
# PROFILE_SECTIONS (space separated, default all): which of verdict, builtin (1-3), lines (the
# source lines of 4) and ncu-submissions (4, after lines) to run. PROFILE_BATCHES (e.g.
# "79 16254"): the submissions profiled by one Run at each of these batches, not by the suite.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
source scripts/gpu-env.sh
log="$out/profile.md"
: >"$log"
machine_section
wants() { [[ " ${PROFILE_SECTIONS:-verdict builtin lines ncu-submissions} " == *" $1 "* ]]; }
h2048=(--suite fused_add_rmsnorm_h2048)
# The metrics the service's profiles read, and the figures ncu derives itself.
profile_metrics() {
  python3 -c 'import json,sys
names=set()
for path in sys.argv[1:]:
  for res in json.load(open(path)).get("results",[]):
    for k in res.get("profile",{}).get("kernels",[]): names.update(k.get("counters",{}))
names.update(["sm__maximum_warps_per_active_cycle_pct","launch__registers_per_thread",
  "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"])
print(",".join(sorted(names)))' "$@"
}

if wants builtin; then
section "Profiles through the service"
start_server profile --device-host "$bin/kerneleval-planted-device-host"
say '```'
"${cli[@]}" bench "${h2048[@]}" --cold --repetitions 20 --profile --measure-dram-bytes \
  --impl cuda_fused --impl lazy_half_rows --format json --out "$out/profile_cold.json" \
  2>"$out/profile_cold.err"
say "bench --profile (cold) exit $?"
"${cli[@]}" bench "${h2048[@]}" --cold --repetitions 20 --profile --impl cuda_fused \
  --impl lazy_half_rows 2>&1 | tail -n 80 | tee -a "$log"
"${cli[@]}" bench "${h2048[@]}" --graph --hot --repetitions 20 --profile --impl cuda_fused \
  --format json --out "$out/profile_graph.json" 2>>"$out/profile_cold.err"
say "bench --profile (graph, hot) exit $?"
say '```'
stop_server
fi

if wants verdict; then
section "A submission's verdict with its profile, as its author asks for it"
start_server verdict --submissions --cuda-include-dir /usr/local/cuda/include \
  --compile-tool "$PWD/$bin/kerneleval-compile"
say '```'
say "kerneleval submit --source examples/submissions/fused_rows_vec16.cu --suite fused_add_rmsnorm_h2048 --profile ..."
"${cli[@]}" submit --source examples/submissions/fused_rows_vec16.cu --entry 'fused_rows_vec16<0>' \
  --block 128 --rows-per-block 1 --pdl --dtype bf16 --name fused_rows_vec16 \
  --suite fused_add_rmsnorm_h2048 --profile >"$out/verdict_profile.txt" 2>&1
say "exit $?"
head -n 400 "$out/verdict_profile.txt" | tee -a "$log"
say '```'
stop_server
fi

submissions=()
if wants lines || wants ncu-submissions; then
section "Source lines of submissions (PC sampling)"
start_server lines --submissions --cuda-include-dir /usr/local/cuda/include \
  --compile-tool "$PWD/$bin/kerneleval-compile"
say '```'
register_cuda_examples
register_emitted_examples
submissions=("${cuda_examples[@]}" "${emitted[@]}")
lines_impls=("${submissions[@]/#/--impl=}")
if [ -z "${PROFILE_BATCHES:-}" ]; then
  "${cli[@]}" bench "${h2048[@]}" --cold --repetitions 5 --profile "${lines_impls[@]}" \
    --format json --out "$out/profile_lines.json" 2>"$out/profile_lines.err"
  say "bench --profile (submissions) exit $?"
else
  # Quicker: one profiled Run of each submission at each of these batches, gathered into a
  # report of the bench's shape.
  read -ra batches <<<"$PROFILE_BATCHES"
  for impl in "${submissions[@]}"; do
    for b in "${batches[@]}"; do
      "${cli[@]}" run --device cuda:0 --impl "$impl" --batch "$b" --hidden 2048 --dtype bf16 \
        --profile --json >"$out/run_${impl}_b$b.json" 2>>"$out/profile_lines.err"
      say "run --profile $impl B = $b: exit $?"
    done
  done
  python3 - "$out" "${submissions[@]}" -- "${batches[@]}" <<'PY'
import json, sys
out, rest = sys.argv[1], sys.argv[2:]
impls, batches = rest[:rest.index("--")], rest[rest.index("--") + 1:]
results = []
for impl in impls:
    for b in batches:
        try:
            run = json.load(open(f"{out}/run_{impl}_b{b}.json"))
        except (OSError, ValueError):
            continue
        results.append({"implementation": impl, "workload": f"batch_size={b}",
                        "axes": {"batch_size": b}, "profile": run.get("profile", {})})
json.dump({"results": results}, open(f"{out}/profile_lines.json", "w"))
PY
  rm -f "$out"/run_*_b*.json  # the outputs' tensors, tens of MB each
fi
say '```'
stop_server
python3 scripts/summarize_report.py --source-lines "$out/profile_lines.json" | tee -a "$log"
fi

if wants builtin; then
section "Nsight Compute over the kernel bench, the same metrics"
metrics=$(profile_metrics "$out/profile_cold.json")
say '```'
if command -v ncu >/dev/null && [ -n "$metrics" ]; then
  timeout 300 ncu --clock-control none --cache-control all --metrics "$metrics" --csv --print-units base \
    "$bin/kerneleval-kernel-bench" --ncu --no-unfused >"$out/ncu_profile.csv" 2>"$out/ncu.err"
  say "ncu exit $?"
else
  say "ncu not found, or no profile to compare"
fi
say '```'
section "The service's profile of cuda_fused against Nsight Compute's"
python3 scripts/profile_vs_ncu.py "$out/profile_cold.json" "$out/ncu_profile.csv" | tee -a "$log"
fi

if wants ncu-submissions; then
section "Nsight Compute over the device host: the submissions"
say '```'
metrics=$(profile_metrics "$out/profile_lines.json")
if command -v ncu >/dev/null && [ -n "$metrics" ] && [ ${#submissions[@]} -gt 0 ]; then
  # Each submission's kernels by name; the grid tells the batch apart.
  server_wrapper=(timeout 300 ncu --target-processes all --clock-control none
    --cache-control all --metrics "$metrics" --csv --print-units base
    --kernel-name-base demangled
    --kernel-name "regex:(naive_block_per_row|warp_per_row_vec|fused_rows_vec16|add_rmsnorm|kernel_cutlass_)"
    --log-file "$out/ncu_submissions.csv")
  start_server ncu --disable-cupti --submissions --cuda-include-dir /usr/local/cuda/include \
    --compile-tool "$PWD/$bin/kerneleval-compile"
  server_wrapper=()
  register_cuda_examples >/dev/null
  register_emitted_examples >/dev/null
  for impl in "${submissions[@]}"; do
    for b in 79 16254; do
      "${cli[@]}" run --device cuda:0 --impl "$impl" --batch "$b" --hidden 2048 --dtype bf16 \
        >/dev/null 2>&1
      say "run $impl B = $b: exit $?"
    done
  done
  # The server itself, not ncu: ncu writes its results when its target exits.
  pkill -TERM -x kerneleval-serv  # the name the kernel keeps: its first 15 characters
  wait "$server_pid"
  say "ncu exit $?"
else
  say "ncu not found, or no profile to compare"
fi
say '```'
section "The service's profiles of the submissions against Nsight Compute's"
python3 scripts/profile_vs_ncu.py --submissions "$out/profile_lines.json" \
  "$out/ncu_submissions.csv" | tee -a "$log"
fi
