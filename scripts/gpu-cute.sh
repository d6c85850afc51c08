#!/usr/bin/env bash
# Runs on the GPU machine from the repository root with bundle/gpu (scripts/gpu-bundle.sh,
# which compiles the CuTe DSL example into bundle/gpu/cute on the machine that builds it):
# the CuTe DSL example, registered from its PTX through the CLI with each tensor bound as the
# struct CuTe passes, ranked on fused_add_rmsnorm_h2048 beside the built-ins, cold and in
# graph replay, every call checked. Writes $OUT/cute.md (or ./gpu-results). REPETITIONS
# (default 20).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
source scripts/gpu-env.sh
log="$out/cute.md"
: >"$log"
machine_section
if [ ! -f "$bundle/cute/add_rmsnorm.flags" ]; then
  say "no $bundle/cute: build the bundle where the CuTe DSL is installed"
  exit 1
fi
start_server cute --submissions --cuda-include-dir /usr/local/cuda/include \
  --compile-tool "$PWD/$bin/kerneleval-compile"
read -ra flags <"$bundle/cute/add_rmsnorm.flags"
section "Registration from the PTX, each tensor bound as a struct"
say '```'
"${cli[@]}" submit --source "$bundle/cute/add_rmsnorm_sm_90a.ptx" --name cute_add_rmsnorm \
  --dtype bf16 "${flags[@]}" 2>&1 | tee -a "$log"
say "exit ${PIPESTATUS[0]}"
say '```'
section "A Run (B = 79), checked against the fp64 reference"
say '```'
"${cli[@]}" run --device cuda:0 --impl cute_add_rmsnorm --batch 79 --hidden 2048 --dtype bf16 \
  2>&1 | tail -n 12 | tee -a "$log"
say '```'
section "Ranked beside the built-ins on fused_add_rmsnorm_h2048, every call checked"
reps=(--repetitions "${REPETITIONS:-20}" --check-every-call)
impls=(--impl cuda_fused --impl cute_add_rmsnorm)
bench cute_cold --suite fused_add_rmsnorm_h2048 "${impls[@]}" "${reps[@]}" --cold
bench cute_graph --suite fused_add_rmsnorm_h2048 "${impls[@]}" "${reps[@]}" --hot --graph \
  --graph-calls 20
stop_server
