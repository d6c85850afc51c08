#!/usr/bin/env bash
# Installs, builds, starts the server on the embedded default device (every GPU, else the
# CPU), runs the fused_add_rmsnorm_h2048 suite against it through the client and prints the
# table, then stops the server. Extra arguments go to `kerneleval bench`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# Only what the demo runs: the server, its device host and compile tool, and the CLI.
BUILD_TARGETS=kerneleval-service scripts/build.sh
build_dir=${BUILD_DIR:-build}
server="$build_dir/server/kerneleval-server"
client="$build_dir/client/kerneleval"

port_file=$(mktemp)
rm -f "$port_file"
"$server" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --port-file "$port_file" &
server_pid=$!
trap 'kill -TERM $server_pid 2>/dev/null; wait $server_pid 2>/dev/null; rm -f "$port_file"' EXIT

for _ in $(seq 1 300); do
  [ -s "$port_file" ] && break
  kill -0 "$server_pid" 2>/dev/null || { echo "demo: the server exited" >&2; exit 1; }
  sleep 0.1
done
port=$(sed -E 's/.*"grpc_port": *([0-9]+).*/\1/' "$port_file")
target="127.0.0.1:$port"
for _ in $(seq 1 600); do
  "$client" --target "$target" health --service readiness >/dev/null 2>&1 && break
  sleep 0.2
done
"$client" --target "$target" devices
"$client" --target "$target" bench --suite fused_add_rmsnorm_h2048 "$@"
