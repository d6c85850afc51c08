#!/bin/sh
# A release: both images built from bases pinned by digest, pushed, and every
# overlay pinned to the pushed digests. Needs docker with buildx and push rights.
#
#   deploy/docker/release.sh REGISTRY VERSION      # e.g. registry.example.com/ml 0.2.0
#
# A tag can be re-pushed under a running fleet; a digest cannot. The bases'
# digests are asked of their registry now (the repository cannot hold them:
# its tests have no registry), checked by tests/deploy/check_dockerfile.py
# --release, and printed so that the release notes record them.
set -eu
if [ $# -ne 2 ]; then
  echo "usage: $0 REGISTRY VERSION" >&2
  exit 2
fi
registry=$1
version=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

digest() {
  docker buildx imagetools inspect "$1" --format '{{json .Manifest.Digest}}' | tr -d '"'
}
pin() {
  echo "$1@$(digest "$1")"
}

build_image=$(pin nvidia/cuda:13.0.0-devel-ubuntu24.04)
runtime_image=$(pin nvidia/cuda:13.0.0-base-ubuntu24.04)
cli_image=$(pin ubuntu:24.04)
set -- --build-arg "BUILD_IMAGE=$build_image" --build-arg "RUNTIME_IMAGE=$runtime_image" \
  --build-arg "CLI_IMAGE=$cli_image"
python3 tests/deploy/check_dockerfile.py --release "$@" deploy/docker/Dockerfile
printf 'bases:\n  %s\n  %s\n  %s\n' "$build_image" "$runtime_image" "$cli_image"

docker build -f deploy/docker/Dockerfile "$@" -t "$registry/kerneleval:$version" .
docker build -f deploy/docker/Dockerfile --target cli "$@" -t "$registry/kerneleval-cli:$version" .
docker push "$registry/kerneleval:$version"
docker push "$registry/kerneleval-cli:$version"
deploy/k8s/set-images.py --server "$(pin "$registry/kerneleval:$version")" \
  --cli "$(pin "$registry/kerneleval-cli:$version")"
echo "commit deploy/k8s/overlays/*/kustomization.yaml: the release's digests"
