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
