#!/bin/sh
# Runs "$@" against a throwaway PostgreSQL cluster: initdb in a temporary directory, a server
# on a free loopback port, one database; KERNELEVAL_TEST_POSTGRES names it, and
# KERNELEVAL_TEST_POSTGRES_STOP / _START are commands that stop and start the cluster again on
# the same port (tests of a database that goes away). PostgreSQL
# refuses to run as root, so as root (CI) the cluster belongs to `nobody`.
set -eu
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
  echo "with_postgres.sh: PostgreSQL server binaries not found (apt-get install postgresql)" >&2
  exit 1
fi
dir=$(mktemp -d /tmp/kerneleval-pg.XXXXXX)
as=""
if [ "$(id -u)" = 0 ]; then
  chown nobody "$dir"
  as="runuser -u nobody --"
fi
cleanup() {
  $as "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT INT TERM
$as "$bin/initdb" -D "$dir/data" -U kerneleval --auth=trust -E UTF8 >"$dir/initdb.log" 2>&1 ||
  { cat "$dir/initdb.log" >&2; exit 1; }
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
start="$as $bin/pg_ctl -D $dir/data -l $dir/server.log -w -o '-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off' start"
sh -c "$start" >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
$as "$bin/createdb" -h 127.0.0.1 -p "$port" -U kerneleval kerneleval_test
KERNELEVAL_TEST_POSTGRES_STOP="$as $bin/pg_ctl -D $dir/data -m fast -w stop" \
KERNELEVAL_TEST_POSTGRES_START="$start" \
KERNELEVAL_TEST_POSTGRES="postgresql://kerneleval@127.0.0.1:$port/kerneleval_test" "$@"
