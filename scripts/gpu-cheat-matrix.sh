#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, after scripts/gpu-bundle.sh: every planted
# cheat of tests/gpu/cheats in every protocol (cold, hot, hot graph replay, hot rotated), by
# name and by id, in Benchmark and in Run, through the real server and CLI, beside the
# built-in kernel; then the examples, which must still be ranked. Prints the matrix
# (scripts/cheat_matrix.py): each cell must be unranked (REJECTED or INCORRECT), except
# where a cheat has nothing to gain in that protocol (marked '~' when it is ranked there,
# e.g. skip_repeated_inputs in the chained windows, whose inputs never repeat).
# Writes $OUT/matrix.md (or ./gpu-results). REPETITIONS (default 20) sets the timed calls of
# each bench; EXAMPLES=0 leaves out the examples' section.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-env.sh
log="$out/matrix.md"
: >"$log"
machine_section
start_server matrix --submissions --cuda-include-dir /usr/local/cuda/include \
  --compile-tool "$PWD/$bin/kerneleval-compile" --device-call-timeout-seconds 20

cheats=(half_rows pointer_cache stale_output skip_repeated_inputs read_past_inputs
        output_inspect probe_one_per_row call_counter pdl_wait_late)
section "Registering"
say '```'
mkdir -p "$out/cheats"
for cheat in "${cheats[@]}" pdl_no_wait; do
  cat tests/gpu/cheats/common.cuh "tests/gpu/cheats/$cheat.cu" >"$out/cheats/$cheat.cu"
  pdl=()
  case $cheat in pdl_*) pdl=(--pdl) ;; esac
  say "cheat_$cheat: $("${cli[@]}" submit --source "$out/cheats/$cheat.cu" --name "cheat_$cheat" \
    --entry "$cheat" --block 256 --rows-per-block 1 --dtype bf16 "${pdl[@]}" 2>&1 |
    tr '\n' ' ' | cut -c1-240)"
done
register_cuda_examples
# The Triton cheats (tests/gpu/cheats/triton_cheats.py), from their PTX: ranked nowhere, like
# the others; triton_pdl_no_wait must be refused at registration. (The Triton example itself is
# ranked among the examples below, registered with the other emitted ones.)
if [ -f "$bundle/triton/triton_half_rows.flags" ]; then
  for cheat in triton_half_rows triton_call_counter triton_pdl_no_wait; do
    read -ra flags <"$bundle/triton/$cheat.flags"
    say "cheat_$cheat: $("${cli[@]}" submit --source "$bundle/triton/${cheat}_sm_90a.ptx" \
      --name "cheat_$cheat" --dtype bf16 "${flags[@]}" 2>&1 | tr '\n' ' ' | cut -c1-240)"
    [ "$cheat" != triton_pdl_no_wait ] && cheats+=("$cheat")
  done
fi
say '```'

impls=(--impl cuda_fused)
for c in "${cheats[@]}"; do impls+=(--impl "cheat_$c"); done
: >"$out/ids.txt"
id_impls=(--impl cuda_fused)
listing=$("${cli[@]}" submissions 2>/dev/null)
for c in "${cheats[@]}"; do
  id=$(grep -E "cheat_$c( |$)" <<<"$listing" | grep -oE 'sub-[0-9a-f]+' | head -n 1)
  [ -n "$id" ] && id_impls+=(--impl "$id") && echo "$c $id" >>"$out/ids.txt"
done
quiet_bench() {  # report name, then bench flags
  local name=$1
  shift
  local t0=$SECONDS
  "${cli[@]}" bench --suite fused_add_rmsnorm_h2048 "$@" --repetitions "${REPETITIONS:-20}" --format json \
    --out "$out/$name.json" >/dev/null 2>"$out/$name.err"
  say "- $name: exit $?, $((SECONDS - t0)) s"
}
section "Benchmarks"
quiet_bench name_cold "${impls[@]}" --cold
quiet_bench name_hot "${impls[@]}" --hot
quiet_bench name_graph "${impls[@]}" --hot --graph --graph-calls 20
quiet_bench name_rotate "${impls[@]}" --hot --rotate
quiet_bench id_cold "${id_impls[@]}" --cold
quiet_bench id_graph "${id_impls[@]}" --hot --graph --graph-calls 20
section "Run of each cheat (B = 79, the outputs returned only if they pass)"
: >"$out/runs.txt"
for c in "${cheats[@]}"; do
  "${cli[@]}" run --device cuda:0 --impl "cheat_$c" --batch 79 --hidden 2048 --dtype bf16 --json \
    >"$out/run_$c.json" 2>"$out/run_$c.err"
  rc=$?
  status=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); c=d.get('correctness',{}); print('passed' if c.get('passed') else 'failed')" \
    "$out/run_$c.json" 2>/dev/null || echo "error_exit_$rc")
  echo "cheat_$c $status" >>"$out/runs.txt"
  say "- cheat_$c: exit $rc, $status: $(head -c 200 "$out/run_$c.err" | tr '\n' ' ')"
done

python3 - "$out" "${cheats[@]}" <<'PY'
import json, sys
out, cheats = sys.argv[1], sys.argv[2:]
columns = [{"name": n, "report": f"{n}.json"} for n in
           ["name_cold", "name_hot", "name_graph", "name_rotate"]]
ids = {}
for line in open(f"{out}/ids.txt"):
    c, _, i = line.strip().partition(" ")
    ids[c] = i
columns += [{"name": n, "report": f"{n}.json", "ids": ids} for n in ["id_cold", "id_graph"]]
columns.append({"name": "run_b79", "runs": "runs.txt"})
# Nothing to gain: skip_repeated_inputs where inputs never repeat (chained windows, a Run's
# one call); pdl_wait_late where no call has a predecessor to overlap (cold, each call alone;
# hot without a graph, checks between the calls; a Run). In a Run, "passed" means its
# outputs were right and were returned.
anyof = {"skip_repeated_inputs": ["name_hot", "name_graph", "name_rotate", "id_graph", "run_b79"],
         "pdl_wait_late": ["name_cold", "id_cold", "name_hot", "name_rotate", "run_b79"]}
expect = {c: {col["name"]: ("any" if col["name"] in anyof.get(c, []) else "never")
              for col in columns} for c in cheats}
json.dump(columns, open(f"{out}/columns.json", "w"))
json.dump(expect, open(f"{out}/expect.json", "w"))
PY
section "The matrix"
python3 scripts/cheat_matrix.py "$out" | tee -a "$log"
say "matrix exit: ${PIPESTATUS[0]}"
[ "${EXAMPLES:-1}" = 0 ] && { stop_server; exit 0; }
section "The examples beside the built-in, every call checked: all ranked"
say '```'
register_emitted_examples
examples=(cuda_fused "${cuda_examples[@]}" "${emitted[@]}")
quiet_bench examples_cold "${examples[@]/#/--impl=}" --cold
quiet_bench examples_graph "${examples[@]/#/--impl=}" --hot --graph --graph-calls 20
for r in examples_cold examples_graph; do
  python3 scripts/check_expectations.py "$out/$r.json" --ranked "${examples[@]}" |
    sed "s/^/$r: /" | tee -a "$log"
done
say '```'
stop_server
