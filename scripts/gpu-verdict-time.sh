#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, after scripts/gpu-bundle.sh: the time from
# registering a submission to its verdicts on the h2048 suite, every check on, through the
# real server and CLI. A fresh source each run (a comment with the time), so nothing comes
# from the compile cache. Each step is timed from the client: register (compile), then a
# cold benchmark and a hot graph-replay benchmark of the submission beside cuda_fused,
# both by name and, for the cold one, by id. Writes $OUT/verdict-time.md.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-env.sh
log="$out/verdict-time.md"
: >"$log"
machine_section
# The compile jail needs Landlock; on a kernel without it the compile runs unconfined, and
# the log says so.
jail=()
if ! grep -q landlock /sys/kernel/security/lsm 2>/dev/null; then
  jail=(--allow-unconfined-compile)
  say "- no Landlock on this kernel ($(cat /sys/kernel/security/lsm 2>&1)): compiles unconfined"
fi
start_server verdict --submissions --cuda-include-dir /usr/local/cuda/include \
  --compile-tool "$PWD/$bin/kerneleval-compile" "${jail[@]}"

now() { date +%s.%N; }
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f} s')" "$1" "$2"; }

source_file="$out/verdict_naive.cu"
{ echo "// $(date +%s%N)"; cat examples/submissions/naive_block_per_row.cu; } >"$source_file"

section "Register to verdict (one submission, h2048, every check on)"
say '```'
t0=$(now)
"${cli[@]}" submit --source "$source_file" --name verdict_naive --entry naive_block_per_row \
  --block 256 --rows-per-block 1 --dtype bf16 >"$out/verdict-submit.txt" 2>&1
say "submit exit $?: $(elapsed "$t0" "$(now)")"
id=$(grep -oE 'sub-[0-9a-f]+' "$out/verdict-submit.txt" | head -n 1)
say "id: $id"
t1=$(now)
"${cli[@]}" bench --suite fused_add_rmsnorm_h2048 --impl cuda_fused --impl verdict_naive --cold \
  --format json --out "$out/verdict-cold.json" >/dev/null 2>"$out/verdict-cold.err"
say "cold bench exit $?: $(elapsed "$t1" "$(now)")"
t2=$(now)
"${cli[@]}" bench --suite fused_add_rmsnorm_h2048 --impl cuda_fused --impl verdict_naive --graph \
  --hot --format json --out "$out/verdict-graph.json" >/dev/null 2>"$out/verdict-graph.err"
say "graph bench exit $?: $(elapsed "$t2" "$(now)")"
say "register to both verdicts: $(elapsed "$t0" "$(now)")"
t3=$(now)
"${cli[@]}" bench --suite fused_add_rmsnorm_h2048 --impl cuda_fused --impl "$id" --cold \
  --format json --out "$out/verdict-cold-by-id.json" >/dev/null 2>"$out/verdict-cold-by-id.err"
say "cold bench by id exit $?: $(elapsed "$t3" "$(now)")"
say '```'
for report in verdict-cold verdict-graph verdict-cold-by-id; do
  say ""
  say "#### $report"
  say '```'
  python3 scripts/summarize_report.py "$out/$report.json" | tee -a "$log"
  python3 scripts/check_expectations.py "$out/$report.json" --ranked cuda_fused | tee -a "$log"
  say '```'
done
stop_server
