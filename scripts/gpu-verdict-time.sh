#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, after scripts/gpu-bundle.sh: the time from
# registering a submission to its verdicts on the h2048 suite, every check on, through the
# real server and CLI, and where that time goes. A fresh source each run (a comment with the
# time), so nothing comes from the compile cache. Each bench's progress lines (one per
# workload on stderr when it is not a terminal) are stamped with the seconds since the
# bench started, so the time of each workload is the difference of two stamps; benches that
# differ in one thing (checks off / every call checked / a submission with its verification
# rounds; cold / graph replay) give the cost of that thing. Writes $OUT/verdict-time.md.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-env.sh
log="$out/verdict-time.md"
: >"$log"
machine_section
start_server verdict --submissions --cuda-include-dir /usr/local/cuda/include \
  --compile-tool "$PWD/$bin/kerneleval-compile"

now() { date +%s.%N; }
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f} s')" "$1" "$2"; }
# name, then bench flags: the bench's wall time and its stamped per-workload progress lines.
timed_bench() {
  local name=$1
  shift
  local t0
  t0=$(now)
  "${cli[@]}" bench --suite fused_add_rmsnorm_h2048 "$@" --format json --out "$out/$name.json" \
    2>&1 >/dev/null | while IFS= read -r line; do
    printf '%s %s\n' "$(python3 -c "import sys,time; print(f'{time.time() - float(sys.argv[1]):7.2f}')" "$t0")" "$line"
  done >"$out/$name.progress"
  say "$name ($*): $(elapsed "$t0" "$(now)")"
  sed 's/^/    /' "$out/$name.progress" | tee -a "$log" >/dev/null
}

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
timed_bench verdict-cold --impl verdict_naive --cold
timed_bench verdict-graph --impl verdict_naive --graph --hot
say "register to both verdicts: $(elapsed "$t0" "$(now)")"
say '```'

section "Where the time goes: the built-in alone, unchecked and every call checked"
say '```'
timed_bench fused-cold --impl cuda_fused --cold
timed_bench fused-cold-checked --impl cuda_fused --cold --check-every-call
timed_bench fused-graph --impl cuda_fused --graph --hot
timed_bench fused-graph-checked --impl cuda_fused --graph --hot --check-every-call
timed_bench verdict-cold-beside --impl cuda_fused --impl "$id" --cold
say '```'
for report in verdict-cold verdict-graph verdict-cold-beside; do
  say ""
  say "#### $report"
  say '```'
  python3 scripts/summarize_report.py "$out/$report.json" | tee -a "$log"
  say '```'
done
stop_server
