#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, after scripts/gpu-bundle.sh with
# PEER_WHEELS holding the client's wheels (kerneleval-client, grpcio, protobuf): the Triton
# example from a Python function to a ranked verdict in one call (kerneleval.triton.submit,
# compiled there by the machine's own Triton), then the same kernel timed by Triton's own
# launcher (scripts/triton_own_launch.py), for the service's cold medians to be read
# against. Writes $OUT/triton.md (or ./gpu-results). REPETITIONS (default 20).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-env.sh
log="$out/triton.md"
: >"$log"
machine_section
start_server triton --submissions --cuda-include-dir /usr/local/cuda/include \
  --compile-tool "$PWD/$bin/kerneleval-compile"

section "kerneleval.triton.submit: the example on fused_add_rmsnorm_h2048 (cold), every call checked"
say '```'
timeout 300 python3 examples/submissions/triton/add_rmsnorm.py --server "127.0.0.1:$port" \
  --repetitions "${REPETITIONS:-20}" 2>"$out/triton-submit.err" | tee -a "$log"
say "exit ${PIPESTATUS[0]}"
tail -n 5 "$out/triton-submit.err" | tee -a "$log"
say '```'
stop_server

section "The same kernel by Triton's own launcher"
timeout 120 python3 scripts/triton_own_launch.py suites/fused_add_rmsnorm_h2048.json 2>&1 |
  grep -v Warning | tee -a "$log"
