# shellcheck shell=bash disable=SC2034,SC2154
# Sourced by the scripts that run on the GPU machine, from the repository root: unpacks
# bundle/gpu (scripts/gpu-bundle.sh) if needed, puts its libraries on the loader path, and
# defines $bin, $out ($OUT, or ./gpu-results), the log helpers writing to $log, and bench
# (a `kerneleval bench` through the caller's $cli, summarized into the log).
bundle=bundle/gpu
if [ ! -d "$bundle" ] && [ -f bundle/gpu.tgz ]; then tar -C bundle -xzf bundle/gpu.tgz; fi
out=${OUT:-gpu-results}
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/$bundle/lib:${LD_LIBRARY_PATH:-}:/usr/local/cuda/lib64"
bin="$bundle/bin"
say() { printf '%s\n' "$*" | tee -a "$log"; }
section() { say ""; say "### $*"; say ""; }
bench() {  # name, then bench flags
  local name=$1
  shift
  say ""
  say "#### $name: kerneleval bench $*"
  say '```'
  "${cli[@]}" bench "$@" --format json --out "$out/$name.json" >/dev/null 2>"$out/$name.err"
  say "exit $?"
  python3 scripts/summarize_report.py "$out/$name.json" | tee -a "$log"
  say '```'
}
# The machine (GPU, driver, clocks) into the log, and the peers' wheels (bundle/gpu/wheels,
# e.g. Liger-Kernel) on the Python path.
machine_section() {
  section "Machine"
  say '```'
  nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw \
    --format=csv 2>&1 | tee -a "$log"
  say '```'
  if [ -d "$bundle/wheels" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/peer-site "$bundle"/wheels/*.whl >/dev/null 2>&1 &&
      export PYTHONPATH=/tmp/peer-site${PYTHONPATH:+:$PYTHONPATH}
    # A carried protobuf must shadow the image's: where the image's `google` is a regular
    # package it would win over this namespace portion, so this one becomes the regular
    # package, reaching the image's other google.* packages through its path.
    if [ -d /tmp/peer-site/google ] && [ ! -f /tmp/peer-site/google/__init__.py ]; then
      echo "__path__ = __import__('pkgutil').extend_path(__path__, __name__)" \
        >/tmp/peer-site/google/__init__.py
      # An older protobuf's *-nspkg.pth puts its own `google` into sys.modules while site
      # starts, before any import could find the package above; sitecustomize runs after
      # the .pth files, so it drops that entry and the next import finds the carried one.
      printf '%s\n' "import sys" \
        "for name in [m for m in sys.modules if m == 'google' or m.startswith('google.')]:" \
        "    del sys.modules[name]" >/tmp/peer-site/sitecustomize.py
    fi
  fi
}
# A server on this GPU (name: its port file and log in $out, then extra server flags): sets
# $server_pid, $port, $mport and $cli (the CLI aimed at it) once readiness is SERVING.
# server_wrapper: a command the server runs under (e.g. ncu), empty by default.
server_pid=""
server_wrapper=()
start_server() {  # name, then server flags
  local name=$1
  shift
  rm -f "$out/ports-$name.json"
  "${server_wrapper[@]}" "$bin/kerneleval-server" --listen 127.0.0.1:0 \
    --metrics-listen 127.0.0.1:0 --device cuda:0 \
    --suites-dir suites --port-file "$out/ports-$name.json" "$@" 2>"$out/server-$name.log" &
  server_pid=$!
  for _ in $(seq 1 600); do [ -s "$out/ports-$name.json" ] && break; sleep 0.1; done
  port=$(sed -E 's/.*"grpc_port": *([0-9]+).*/\1/' "$out/ports-$name.json")
  mport=$(sed -E 's/.*"metrics_port": *([0-9]+).*/\1/' "$out/ports-$name.json")
  cli=("$bin/kerneleval" --target "127.0.0.1:$port" --deadline 600)
  for _ in $(seq 1 600); do "${cli[@]}" health --service readiness >/dev/null 2>&1 && break; sleep 0.2; done
}
stop_server() {
  kill -TERM "$server_pid"
  wait "$server_pid"
  say "- server exit after SIGTERM: $?"
}
# Registers on the running server the three CUDA examples of examples/submissions, under the
# names in $cuda_examples, and says what the CLI answered for each.
cuda_examples=(naive warp_per_row fused_rows_vec16)
register_cuda_examples() {
  local ex=examples/submissions spec name src entry block rows flags extra
  for spec in "naive $ex/naive_block_per_row.cu naive_block_per_row 256 1" \
    "warp_per_row $ex/warp_per_row_vec.cu warp_per_row_vec 256 8" \
    "fused_rows_vec16 $ex/fused_rows_vec16.cu fused_rows_vec16<0> 128 1 --pdl"; do
    read -r name src entry block rows flags <<<"$spec"
    read -ra extra <<<"$flags"
    say "$name: $("${cli[@]}" submit --source "$src" --name "$name" --entry "$entry" \
      --block "$block" --rows-per-block "$rows" --dtype bf16 "${extra[@]}" 2>&1 | tr '\n' ' ' |
      cut -c1-160)"
  done
}
# Registers on the running server each Python-language example the bundle holds
# (bundle/gpu/<language>, compiled by scripts/gpu-bundle.sh) as <language>_add_rmsnorm, from
# its PTX with the flags its --emit wrote; says what the CLI answered, and leaves the names
# registered in $emitted.
emitted=()
register_emitted_examples() {
  local language flags
  emitted=()
  for language in triton cute tilelang; do
    [ -f "$bundle/$language/add_rmsnorm.flags" ] || continue
    read -ra flags <"$bundle/$language/add_rmsnorm.flags"
    say "${language}_add_rmsnorm: $("${cli[@]}" submit --name "${language}_add_rmsnorm" \
      --source "$bundle/$language/add_rmsnorm_sm_90a.ptx" --dtype bf16 "${flags[@]}" 2>&1 |
      tr '\n' ' ' | cut -c1-400)"
    emitted+=("${language}_add_rmsnorm")
  done
}
