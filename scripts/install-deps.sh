#!/usr/bin/env bash
# Installs what building and testing kerneleval needs on Debian 12 (bookworm). The CUDA
# toolkit is optional: where /usr/local/cuda/bin/nvcc exists the CUDA parts build too.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git ca-certificates curl
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  prometheus-cpp-dev libgtest-dev libgmock-dev nlohmann-json3-dev libcli11-dev
  prometheus prometheus-pushgateway yamllint python3 python3-yaml python3-venv clang-format openssl
  clang libclang-rt-14-dev libhwy-dev
  libsqlite3-dev libpq-dev postgresql  # the results store; tests start a throwaway cluster
  libseccomp-dev  # the compile jail of submitted kernels
  chromium  # the HTML report's drawings laid out by a real browser (a client test)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
