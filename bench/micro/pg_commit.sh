#!/usr/bin/env bash
# pg_commit_bench (a store's commit in PostgreSQL against PostgreSQL's own
# commit of the same bytes) on a server of its own: initdb and pg_ctl in a
# temporary directory, on a Unix socket, as the postgres user when run as
# root; fsync on, as a production server.
#   bench/micro/pg_commit.sh [REPS [--no-sync]]      (default 15)
# Needs build/oo (cmake --build build/oo --target pg_commit_bench) and postgresql-15.
set -euo pipefail
cd "$(dirname "$0")/../.."
bench=build/oo/bench/micro/pg_commit_bench
[ -x "$bench" ] || { echo "build it first: cmake --build build/oo --target pg_commit_bench" >&2; exit 2; }
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
dir=$(mktemp -d /var/tmp/steppe-pgcommit-XXXXXX)
chmod 755 "$dir"
as_pg=()
if [ "$(id -u)" = 0 ]; then chown postgres "$dir"; as_pg=(runuser -u postgres --); fi
port=$((20000 + $$ % 20000))
"${as_pg[@]}" "$bin/initdb" -D "$dir/data" -A trust -U steppe >/dev/null
"${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -o "-k $dir -c listen_addresses= -p $port" -l "$dir/log" -w start >/dev/null
trap '"${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -m fast stop >/dev/null; rm -rf "$dir"' EXIT
${PERF:-} "$bench" "postgresql:///postgres?host=$dir&port=$port&user=steppe" --reps "${1:-15}" ${2:-}
