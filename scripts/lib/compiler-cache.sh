# Sourced by the build scripts: the compiler cache every build tree shares. The cache lives
# outside the clone (KERNELEVAL_CCACHE_DIR, default ~/.cache/kerneleval/ccache), so a machine
# that has built the project before recompiles only what changed, whichever clone it builds.
# Paths under the clone are hashed relative to it (base_dir) and the build directory is left
# out of the hash (hash_dir off), so two clones at different paths share hits.
#
# After sourcing: ${cache_args[@]} holds the CMake arguments (empty where ccache is missing).
cache_args=()
if command -v ccache >/dev/null; then
  export CCACHE_DIR="${KERNELEVAL_CCACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kerneleval/ccache}"
  export CCACHE_BASEDIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  export CCACHE_NOHASHDIR=1
  export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-8G}"
  mkdir -p "$CCACHE_DIR"
  # The settings travel in the launcher itself, so that a later plain `cmake --build` of the
  # tree (or a build started by an IDE) uses this cache too, not ccache's own default.
  launcher="env;CCACHE_DIR=$CCACHE_DIR;CCACHE_BASEDIR=$CCACHE_BASEDIR;CCACHE_NOHASHDIR=1"
  launcher+=";CCACHE_MAXSIZE=$CCACHE_MAXSIZE;ccache"
  cache_args=("-DCMAKE_C_COMPILER_LAUNCHER=$launcher" "-DCMAKE_CXX_COMPILER_LAUNCHER=$launcher"
              "-DCMAKE_CUDA_COMPILER_LAUNCHER=$launcher")
fi
# Ninja where present: it starts no sub-make per directory and its no-op build is instant.
generator_args=()
if command -v ninja >/dev/null; then
  generator_args=(-G Ninja)
fi

# configure_args BUILD_DIR: the generator and cache arguments for `cmake -S . -B BUILD_DIR`.
# A tree configured before keeps its generator (CMake refuses to change it in place).
configure_args() {
  if [ -f "$1/CMakeCache.txt" ]; then
    printf '%s\n' "${cache_args[@]}"
  else
    printf '%s\n' "${generator_args[@]}" "${cache_args[@]}"
  fi
}
