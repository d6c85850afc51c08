#!/usr/bin/env bash
# The Python side of the tests: a virtualenv with the pinned PyPI packages of
# tests/python/requirements.txt, and the client package built from client/python (its stubs
# generated from proto/ again, so that they match the tree).
#
#   scripts/install-python-deps.sh [VENV_DIR]   (default: ${BUILD_DIR:-build}/python-venv)
#
# Needs python3 with venv (Debian: python3-venv, which scripts/install-deps.sh installs) and
# network access to PyPI the first time.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-${BUILD_DIR:-build}/python-venv}

if [ ! -x "$venv/bin/python" ]; then
  echo "install-python-deps: creating $venv"
  python3 -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check)
"${pip[@]}" install --quiet -r tests/python/requirements.txt
# The build needs only what the pins above installed (setuptools, grpcio-tools).
"${pip[@]}" install --quiet --no-deps --no-build-isolation --force-reinstall ./client/python
echo "install-python-deps: $("$venv/bin/python" -c 'import kerneleval, tritonclient.grpc, grpc; print("kerneleval-client", kerneleval.__version__, "grpcio", grpc.__version__)')"
