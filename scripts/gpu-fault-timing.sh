#!/usr/bin/env bash
# Runs on the GPU machine (see gpu-isolation.sh): where the time of a sticky-fault recovery
# goes (the faulting call, the host's exit, the new host's start), with the fault call
# timed by CUDA events behind the stream gate (Run's default) and by CUPTI (no gate).
# Timestamps in the log.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
source scripts/gpu-env.sh
log="$out/fault-timing.md"
: >"$log"
stamp() { while IFS= read -r line; do printf '%s %s\n' "$(date +%T.%3N)" "$line"; done; }
variant() {  # name, extra run flags
  local name=$1 runflags=$2
  say ""
  say "### $name"
  say '```'
  rm -f "$out/ports.json"
  "$bin/kerneleval-server" --listen 127.0.0.1:0 --metrics-listen "" --device cuda:0 \
    --port-file "$out/ports.json" --enable-fault-injection 2> >(stamp >>"$log") &
  local pid=$!
  for _ in $(seq 1 600); do [ -s "$out/ports.json" ] && break; sleep 0.1; done
  local port
  port=$(sed -E 's/.*"grpc_port": *([0-9]+).*/\1/' "$out/ports.json")
  local cli=("$bin/kerneleval" --target "127.0.0.1:$port" --deadline 600)
  for _ in $(seq 1 600); do "${cli[@]}" health --service readiness >/dev/null 2>&1 && break; sleep 0.1; done
  for round in 1 2; do
    say "$(date +%T.%3N) fault call $round"
    # shellcheck disable=SC2086
    "${cli[@]}" run --device cuda:0 --impl fault_illegal_address --batch 4 --hidden 2048 $runflags 2>&1 | stamp | tee -a "$log" >/dev/null
    say "$(date +%T.%3N) fault call answered"
    for _ in $(seq 1 1200); do "${cli[@]}" health --service readiness >/dev/null 2>&1 && break; sleep 0.02; done
    say "$(date +%T.%3N) SERVING"
    say "$("${cli[@]}" run --device cuda:0 --batch 1 --hidden 2048 2>&1 | grep -E '^median' | tr -s ' ')"
  done
  kill -TERM "$pid"
  wait "$pid"
  sleep 0.2
  say '```'
}
variant "fault call timed by events behind the gate (default)" ""
variant "fault call timed by CUPTI" "--timer cupti"
