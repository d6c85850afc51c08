#!/usr/bin/env bash
# Kernel tuning runs on the GPU machine (from the repository root, with bundle/gpu from
# scripts/gpu-bundle.sh): the kernel tests, the fused kernel's layouts swept side by side,
# and the peers (torch.compile, Liger-Kernel, FlashInfer) at the same shapes. Results go to
# $OUT (or ./gpu-results); results.md there is the entry for docs/results/kernels.md.
#
#   scripts/gpu-kernels.sh STEP...   (default: tests sweep-liger sweep-llm sweep-fp16)
#
#   tests          kernels_gpu_test
#   sweep-GROUP    the launcher's choice beside every split layout (SplitRowKernel) and the
#                  kernels without the split path
#   ours-GROUP     the launcher's choice only (and, where the mode writes two tensors,
#                  device-to-device copies of the same bytes: the memory system's ceiling)
#   peers-GROUP    scripts/torch_peers.py at the same shapes (torch.compile, Liger, FlashInfer)
#   service        the four suites through a real server and CLI: cold (CUPTI, kernel-only,
#                  L2 flushed) on a server as it starts by default, graph replay on one
#                  started with --disable-cupti (no timer attached to the graph kernels)
#
# Groups: liger (fp32, 2048 rows, output + residual_out, hidden 1024..32768); llm (bf16,
# in place and output, hidden 4096 Llama-3-8B, 5120 Qwen2.5-32B, 7168 DeepSeek-V3, 8192
# Llama-3-70B, batch 1, 16, 128, 1024, 4096, 16384); fp16 (output, hidden 2048 / 4096 / 8192);
# h2048 (bf16, output, the fused_add_rmsnorm_h2048 suite's batches).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
source scripts/gpu-env.sh
log="$out/results.md"
: >"$log"
[ $# -gt 0 ] || set -- tests sweep-liger sweep-llm sweep-fp16

liger_hiddens=(1024 2048 4096 8192 16384 32768)
llm_hiddens=(4096 5120 7168 8192)
llm_batches=1,16,128,1024,4096,16384
fp16_batches=1,1024,16384
h2048_batches=1,6,34,64,79,12383,16254

kbench() {  # kerneleval-kernel-bench flags...
  timeout 300 "$bin/kerneleval-kernel-bench" --flush=read --no-unfused "$@" 2>&1 | tee -a "$log"
}

machine_section
flashinfer_lib="$bundle/lib/libkerneleval_flashinfer.so"
peers() {  # torch_peers.py flags...
  PYTHONUNBUFFERED=1 timeout 540 python3 scripts/torch_peers.py --no-eager --reps 50 \
    $([ -f "$flashinfer_lib" ] && echo --flashinfer-lib "$flashinfer_lib") "$@" 2>&1 | tee -a "$log"
}

for step in "$@"; do
  case "$step" in
    tests)
      section "kernels_gpu_test"
      timeout 300 "$bin/kernels_gpu_test" --gtest_brief=1 >"$out/kernels_gpu_test.log" 2>&1
      say "- exit $? ($(grep -E '^\[  (PASSED|FAILED)' "$out/kernels_gpu_test.log" | tr '\n' ' '))"
      grep -E '^\[  FAILED' "$out/kernels_gpu_test.log" | head -n 20 | tee -a "$log"
      ;;
    sweep-* | ours-*)
      group=${step#*-}
      flags=(--reps=30)
      [ "${step%%-*}" = sweep ] && flags+=(--split-sweep)
      [ "${step%%-*}" = ours ] && flags+=(--copy)
      section "Fused kernel: $step"
      say '```'
      case "$group" in
        liger)
          for h in "${liger_hiddens[@]}"; do
            kbench --dtype=fp32 --mode=output_and_residual --hidden="$h" --batches=2048 "${flags[@]}"
          done
          ;;
        llm)
          for mode in in_place output; do
            for h in "${llm_hiddens[@]}"; do
              kbench --dtype=bf16 --mode="$mode" --hidden="$h" --batches="$llm_batches" "${flags[@]}"
            done
          done
          ;;
        fp16)
          for h in 2048 4096 8192; do
            kbench --dtype=fp16 --mode=output --hidden="$h" --batches="$fp16_batches" "${flags[@]}"
          done
          ;;
        h2048)
          kbench --dtype=bf16 --mode=output --hidden=2048 --batches="$h2048_batches" "${flags[@]}"
          kbench --dtype=bf16 --mode=in_place --hidden=2048 --batches="$h2048_batches" "${flags[@]}"
          ;;
      esac
      say '```'
      ;;
    service)
      section "The suites through the server (cuda_fused)"
      for flags in "" "--disable-cupti"; do
        # shellcheck disable=SC2086
        start_server "service${flags}" $flags
        if [ -z "$flags" ]; then
          bench svc_liger_cold --suite liger_fused_add_rmsnorm --impl cuda_fused --cold --repetitions 30
          bench svc_llm_in_place_cold --suite llm_widths_bf16_in_place --impl cuda_fused --cold --repetitions 30
          bench svc_llm_output_cold --suite llm_widths_bf16_output --impl cuda_fused --cold --repetitions 30
          bench svc_h2048_cold --suite fused_add_rmsnorm_h2048 --impl cuda_fused --cold --repetitions 100
        else
          graph=(--graph --graph-calls 50 --hot --repetitions 50)
          bench svc_h2048_graph --suite fused_add_rmsnorm_h2048 --impl cuda_fused "${graph[@]}"
          bench svc_liger_graph --suite liger_fused_add_rmsnorm --impl cuda_fused "${graph[@]}"
        fi
        stop_server
      done
      ;;
    peers-liger)
      section "Peers: Liger sweep (fp32, 2048 rows)"
      say '```'
      peers --dtype fp32 --with-residual --batches 2048 --hidden "$(IFS=,; echo "${liger_hiddens[*]}")" \
        --json "$out/peers-liger.json"
      say '```'
      ;;
    peers-llm)
      section "Peers: LLM widths (bf16)"
      say '```'
      peers --dtype bf16 --batches "$llm_batches" --hidden "$(IFS=,; echo "${llm_hiddens[*]}")" \
        --json "$out/peers-llm.json"
      say '```'
      ;;
    peers-h2048)
      section "Peers: h2048 (bf16)"
      say '```'
      peers --dtype bf16 --batches "$h2048_batches" --hidden 2048 --json "$out/peers-h2048.json"
      say '```'
      ;;
    peers-fp16)
      section "Peers: fp16"
      say '```'
      peers --dtype fp16 --batches "$fp16_batches" --hidden 2048,4096,8192 \
        --json "$out/peers-fp16.json"
      say '```'
      ;;
    *)
      say "unknown step: $step"
      ;;
  esac
done
