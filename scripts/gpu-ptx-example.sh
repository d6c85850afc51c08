#!/usr/bin/env bash
# Runs on the GPU machine from the repository root with bundle/gpu (scripts/gpu-bundle.sh,
# which compiles the Python-language examples into bundle/gpu/<language> on the machine that
# builds it: their compilers need no GPU, and their wheels are larger than what the GPU machine
# can be sent): one example, registered from its PTX through the CLI with the `--arg` flags its
# --emit wrote, run once against the fp64 reference, then ranked on fused_add_rmsnorm_h2048
# beside the built-in, cold and in graph replay, every call checked.
#
#   scripts/gpu-ptx-example.sh triton|cute|tilelang
#
# Writes $OUT/<language>.md (or ./gpu-results). REPETITIONS (default 20).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
language=${1:?usage: scripts/gpu-ptx-example.sh triton|cute|tilelang}
source scripts/gpu-env.sh
log="$out/$language.md"
: >"$log"
machine_section
if [ ! -f "$bundle/$language/add_rmsnorm.flags" ]; then
  say "no $bundle/$language: build the bundle where the $language compiler is installed"
  exit 1
fi
name=${language}_add_rmsnorm
start_server "$language" --submissions --cuda-include-dir /usr/local/cuda/include \
  --compile-tool "$PWD/$bin/kerneleval-compile"
read -ra flags <"$bundle/$language/add_rmsnorm.flags"
section "Registration from the PTX, with the flags of its --emit"
say '```'
"${cli[@]}" submit --source "$bundle/$language/add_rmsnorm_sm_90a.ptx" --name "$name" \
  --dtype bf16 "${flags[@]}" 2>&1 | tee -a "$log"
say "exit ${PIPESTATUS[0]}"
say '```'
section "A Run (B = 79), checked against the fp64 reference"
say '```'
"${cli[@]}" run --device cuda:0 --impl "$name" --batch 79 --hidden 2048 --dtype bf16 \
  2>&1 | tail -n 12 | tee -a "$log"
say '```'
section "Ranked beside the built-ins on fused_add_rmsnorm_h2048, every call checked"
reps=(--repetitions "${REPETITIONS:-20}" --check-every-call)
impls=(--impl cuda_fused --impl "$name")
bench "${language}_cold" --suite fused_add_rmsnorm_h2048 "${impls[@]}" "${reps[@]}" --cold
bench "${language}_graph" --suite fused_add_rmsnorm_h2048 "${impls[@]}" "${reps[@]}" --hot \
  --graph --graph-calls 20
stop_server
