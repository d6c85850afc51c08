#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, after scripts/gpu-bundle.sh: the compile
# jail on the GPU host's own kernel (which may lack Landlock), through the real server and
# CLI. Logs which jail layers hold here, then registers the compile-log exploit of
# tests/security/compile_leak_test.cc (an #include inside a stringified macro argument,
# spelled back by a template error) against a header served from memory (the control, which
# must come back) and against files of this machine (which must not). Writes $OUT/jail.md.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
source scripts/gpu-env.sh
log="$out/jail.md"
: >"$log"
machine_section
section "Kernel"
say '```'
say "$(uname -r); lsm: $(cat /sys/kernel/security/lsm 2>&1)"
say '```'
start_server jail --submissions --cuda-include-dir /usr/local/cuda/include \
  --compile-tool "$PWD/$bin/kerneleval-compile"
section "Jail layers, as the server logs them"
say '```'
grep -i 'compile jail' "$out/server-jail.log" | head -n 3 | tee -a "$log"
curl -s "http://127.0.0.1:$mport/metrics" | grep '^kerneleval_compile_jail_layer' | tee -a "$log"
say '```'

# The exploit, as compile_leak_test.cc writes it.
exploit() {  # include
  printf '#define KE_STR(...) #__VA_ARGS__\n'
  printf '__device__ const char* hide = R"x(\n/*)x";\n'
  printf 'constexpr char leak[] = KE_STR(\n#include %s\n);\n' "$1"
  printf 'static_assert(sizeof(leak) == 1, KE_STR(\n#include %s\n));\n' "$1"
  printf 'template <char... C> struct Show;\n'
  printf 'template <int N, char... C> struct Spell {\n'
  printf '  using type = typename Spell<N - 1, leak[N - 1], C...>::type;\n};\n'
  printf 'template <char... C> struct Spell<0, C...> { using type = Show<C...>; };\n'
  printf '__device__ Spell<(sizeof(leak) > 48 ? 48 : sizeof(leak) - 1)>::type shown;\n'
  printf '// */\n'
  printf '#include <kerneleval/submission_abi.h>\n'
  printf 'extern "C" __global__ void tiny(const kerneleval_params p) {\n'
  printf '  if (threadIdx.x == 0) static_cast<float*>(p.output)[blockIdx.x] = p.eps;\n}\n'
}
spelled() { sed -E "s/(.)/'\1', /g; s/, $//" <<<"$1"; }
echo "kerneleval-planted-$RANDOM$RANDOM" >/tmp/jail-planted.txt
section "The compile-log exploit"
say "| include | expected | answer holds the file's text | exit |"
say "|---|---|---|---|"
n=0
for spec in "<kerneleval/submission_abi.h>|typedef struct kerneleval_params|shown" \
  "\"/tmp/jail-planted.txt\"|$(cat /tmp/jail-planted.txt)|kept out" \
  "\"/etc/passwd\"|$(head -n 1 /etc/passwd)|kept out" \
  "\"/proc/self/environ\"|LD_LIBRARY_PATH|kept out" \
  "\"/usr/lib/os-release\"|$(head -n 1 /usr/lib/os-release 2>/dev/null)|kept out"; do
  IFS='|' read -r inc needle expected <<<"$spec"
  n=$((n + 1))
  exploit "$inc" >"$out/exploit-$n.cu"
  "${cli[@]}" submit --source "$out/exploit-$n.cu" --name "exploit_$n" --entry tiny \
    --block 32 --rows-per-block 1 --dtype fp32 >"$out/exploit-$n.txt" 2>&1
  rc=$?
  short=${needle:0:6}
  if grep -qF -- "$needle" "$out/exploit-$n.txt" || grep -qF -- "$(spelled "$short")" "$out/exploit-$n.txt"; then
    held=yes
  else
    held=no
  fi
  say "| \`$inc\` | $expected | $held | $rc |"
done
stop_server
