#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, after scripts/gpu-bundle.sh: submitted
# kernels through the real server and CLI. The three examples and the built-in kernel are
# registered and benchmarked beside the built-ins in both suites; the planted cheats of
# tests/gpu/cheats are registered and benchmarked (cold, hot and graph replay: every call
# checked; cold: after each call; hot and graph replay:
# every call in its own output slot, chained, checked after each window) and must come back
# REJECTED or INCORRECT, never ranked
# (scripts/check_expectations.py prints OK or UNEXPECTED per implementation); a hanging and
# a faulting submission must each leave the server serving.
# Results go to $OUT (or ./gpu-results), submissions.md there.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-env.sh
log="$out/submissions.md"
: >"$log"

section "The checks of every call through the CUDA backend (call_checks_gpu_test)"
KERNELEVAL_COMPILE_TOOL="$PWD/$bin/kerneleval-compile" KERNELEVAL_SOURCE_DIR="$PWD" \
  timeout 600 "$bin/call_checks_gpu_test" --gtest_brief=1 >"$out/call_checks_gpu_test.log" 2>&1
say "- call_checks_gpu_test: exit $? ($(grep -E '^\[  (PASSED|FAILED|SKIPPED)' \
  "$out/call_checks_gpu_test.log" | tr '\n' ' '))"
grep -E '^\[  FAILED|Failure|Expected|Which is' "$out/call_checks_gpu_test.log" | head -n 20 |
  sed 's/^/    /' | tee -a "$log"

rm -f "$out/ports-sub.json"
"$bin/kerneleval-server" --listen 127.0.0.1:0 --metrics-listen "" --device cuda:0 \
  --suites-dir suites --port-file "$out/ports-sub.json" --submissions \
  --cuda-include-dir /usr/local/cuda/include --compile-tool "$PWD/$bin/kerneleval-compile" \
  --device-call-timeout-seconds 20 2>"$out/server-submissions.log" &
server_pid=$!
for _ in $(seq 1 600); do [ -s "$out/ports-sub.json" ] && break; sleep 0.1; done
port=$(sed -E 's/.*"grpc_port": *([0-9]+).*/\1/' "$out/ports-sub.json")
cli=("$bin/kerneleval" --target "127.0.0.1:$port" --deadline 600)
for _ in $(seq 1 600); do "${cli[@]}" health --service readiness >/dev/null 2>&1 && break; sleep 0.2; done

submit() {  # name, source, then submit flags
  local name=$1 source=$2
  shift 2
  say "- submit $name: $("${cli[@]}" submit --source "$source" --name "$name" "$@" 2>&1 |
    tr '\n' ' ' | cut -c1-300)"
}

section "Registering the examples (bf16, output) and the Liger variants (fp32, output_and_residual)"
ex=examples/submissions
submit naive "$ex/naive_block_per_row.cu" --entry naive_block_per_row --block 256 \
  --rows-per-block 1 --dtype bf16
submit warp_per_row "$ex/warp_per_row_vec.cu" --entry warp_per_row_vec --block 256 \
  --rows-per-block 8 --dtype bf16
submit fused_rows_vec16 "$ex/fused_rows_vec16.cu" --entry 'fused_rows_vec16<0>' --block 128 \
  --rows-per-block 1 --pdl --dtype bf16
submit fused_rows_vec16_liger "$ex/fused_rows_vec16.cu" --entry 'fused_rows_vec16<2>' \
  --block 1024 --rows-per-block 1 --pdl --dtype fp32 --mode output_and_residual
submit naive_liger "$ex/naive_block_per_row.cu" --entry naive_block_per_row --block 256 \
  --rows-per-block 1 --dtype fp32 --mode output_and_residual
submit warp_per_row_liger "$ex/warp_per_row_vec.cu" --entry warp_per_row_vec --block 256 \
  --rows-per-block 8 --dtype fp32 --mode output_and_residual

section "Planted cheats (each the honest naive row plus one trick)"
mkdir -p "$out/cheats"
for cheat in half_rows pointer_cache stale_output skip_repeated_inputs read_past_inputs hang \
  fault output_inspect probe_one_per_row call_counter pdl_wait_late pdl_no_wait; do
  cat tests/gpu/cheats/common.cuh "tests/gpu/cheats/$cheat.cu" >"$out/cheats/$cheat.cu"
  pdl=()
  # pdl_no_wait never waits: its registration must be refused (the log shows the error);
  # pdl_wait_late waits only after reading its input.
  case $cheat in pdl_*) pdl=(--pdl) ;; esac
  submit "cheat_$cheat" "$out/cheats/$cheat.cu" --entry "$cheat" --block 256 \
    --rows-per-block 1 --dtype bf16 "${pdl[@]}"
done

impls=(--impl cuda_fused --impl cuda_unfused --impl naive --impl warp_per_row
       --impl fused_rows_vec16)
cheats=(--impl cuda_fused --impl cheat_half_rows --impl cheat_pointer_cache
        --impl cheat_stale_output --impl cheat_skip_repeated_inputs --impl cheat_read_past_inputs
        --impl cheat_output_inspect --impl cheat_probe_one_per_row --impl cheat_call_counter
        --impl cheat_pdl_wait_late)
section "The planted cheats in graph replay (every call in its own slot, chained, checked after each replay)"
bench sub_cheats_graph --suite fused_add_rmsnorm_h2048 "${cheats[@]}" --graph --graph-calls 20 \
  --hot --repetitions 20
section "The planted cheats in hot replay without a graph"
bench sub_cheats_hot --suite fused_add_rmsnorm_h2048 "${cheats[@]}" --hot --repetitions 20

section "The planted cheats named by id (cold and graph replay): the same checks as by name"
by_id=()
for c in output_inspect probe_one_per_row half_rows stale_output call_counter pdl_wait_late; do
  id=$("${cli[@]}" submissions 2>/dev/null | grep -E "cheat_$c( |$)" | grep -oE 'sub-[0-9a-f]+' |
    head -n 1)
  [ -n "$id" ] && by_id+=("$id")
done
say "ids: ${by_id[*]}"
by_id_flags=()
for id in "${by_id[@]}"; do by_id_flags+=(--impl "$id"); done
bench sub_cheats_by_id --suite fused_add_rmsnorm_h2048 --impl cuda_fused "${by_id_flags[@]}" \
  --cold --repetitions 20
bench sub_cheats_by_id_graph --suite fused_add_rmsnorm_h2048 --impl cuda_fused \
  "${by_id_flags[@]}" --graph --graph-calls 20 --hot --repetitions 20

section "h2048: the examples ranked beside the built-ins"
bench sub_h2048_cold --suite fused_add_rmsnorm_h2048 "${impls[@]}" --cold --repetitions 50
bench sub_h2048_graph --suite fused_add_rmsnorm_h2048 "${impls[@]}" --graph --graph-calls 50 \
  --hot --repetitions 50
section "h2048: the built-ins alone in hot graph replay, unchecked (today's protocol) and checked"
bench builtin_h2048_graph --suite fused_add_rmsnorm_h2048 --impl cuda_fused --impl cuda_unfused \
  --graph --graph-calls 50 --hot --repetitions 50
bench builtin_h2048_graph_checked --suite fused_add_rmsnorm_h2048 --impl cuda_fused \
  --impl cuda_unfused --graph --graph-calls 50 --hot --repetitions 50 --check-every-call
section "The planted cheats (must not be ranked)"
bench sub_cheats --suite fused_add_rmsnorm_h2048 "${cheats[@]}" --cold --repetitions 20 \
  --measure-dram-bytes
section "Liger sweep: the three examples (fp32, output_and_residual) beside the built-ins"
bench sub_liger_cold --suite liger_fused_add_rmsnorm --impl cuda_fused --impl cuda_unfused \
  --impl naive_liger --impl warp_per_row_liger --impl fused_rows_vec16_liger --cold \
  --repetitions 20
section "Expectations: examples ranked in both suites, every planted cheat unranked"
say '```'
ranked=(cuda_fused naive warp_per_row fused_rows_vec16)
planted=(cheat_half_rows cheat_pointer_cache cheat_stale_output cheat_skip_repeated_inputs
         cheat_read_past_inputs cheat_output_inspect cheat_probe_one_per_row cheat_call_counter)
for report in sub_h2048_cold sub_h2048_graph; do
  python3 scripts/check_expectations.py "$out/$report.json" --ranked "${ranked[@]}" | sed "s/^/$report: /" |
    tee -a "$log"
done
python3 scripts/check_expectations.py "$out/sub_liger_cold.json" --ranked cuda_fused naive_liger \
  warp_per_row_liger fused_rows_vec16_liger | sed "s/^/sub_liger_cold: /" | tee -a "$log"
# Cold, each call alone behind a flush: pdl_wait_late has nothing to overlap and computes
# every row, so its rank is honest there.
python3 scripts/check_expectations.py "$out/sub_cheats.json" --ranked cuda_fused \
  --rejected "${planted[@]}" --any cheat_pdl_wait_late | sed "s/^/sub_cheats: /" | tee -a "$log"
# Hot and graph replay: chained calls never repeat their inputs within a window, so
# skip_repeated_inputs finds nothing to skip and computes every call (an honest rank); the
# others must be caught. pdl_wait_late overlaps only consecutive launches: graph replay.
python3 scripts/check_expectations.py "$out/sub_cheats_graph.json" --ranked cuda_fused \
  --rejected cheat_half_rows cheat_pointer_cache cheat_stale_output cheat_read_past_inputs \
  cheat_output_inspect cheat_probe_one_per_row cheat_call_counter cheat_pdl_wait_late \
  --any cheat_skip_repeated_inputs | sed "s/^/sub_cheats_graph: /" | tee -a "$log"
python3 scripts/check_expectations.py "$out/sub_cheats_hot.json" --ranked cuda_fused \
  --rejected cheat_half_rows cheat_pointer_cache cheat_stale_output cheat_read_past_inputs \
  cheat_output_inspect cheat_probe_one_per_row cheat_call_counter \
  --any cheat_skip_repeated_inputs cheat_pdl_wait_late | sed "s/^/sub_cheats_hot: /" | tee -a "$log"
# By id: the last id is pdl_wait_late's, which only graph replay can catch.
python3 scripts/check_expectations.py "$out/sub_cheats_by_id.json" --ranked cuda_fused \
  --rejected "${by_id[@]:0:5}" --any "${by_id[@]:5}" | sed "s/^/sub_cheats_by_id: /" | tee -a "$log"
python3 scripts/check_expectations.py "$out/sub_cheats_by_id_graph.json" --ranked cuda_fused \
  --rejected "${by_id[@]}" | sed "s/^/sub_cheats_by_id_graph: /" | tee -a "$log"
say '```'

section "A hanging and a faulting submission, then the server still serves"
say '```'
for cheat in hang fault; do
  "${cli[@]}" run --device cuda:0 --impl "cheat_$cheat" --batch 64 --hidden 2048 2>&1 |
    cut -c1-400 | tee -a "$log"
  say "cheat_$cheat run exit: ${PIPESTATUS[0]}"
  for i in $(seq 1 300); do
    "${cli[@]}" health --service readiness >/dev/null 2>&1 && { say "readiness SERVING after ~$((i / 5)) s"; break; }
    sleep 0.2
  done
  "${cli[@]}" run --device cuda:0 --impl naive --batch 79 --hidden 2048 --check 2>&1 |
    grep -E 'implementation|median|correctness' | tee -a "$log"
done
say '```'
kill -TERM "$server_pid"
wait "$server_pid"
say "- server exit after SIGTERM: $?"
