#!/usr/bin/env bash
# pg_commit_bench (a store's commit in PostgreSQL against PostgreSQL's own
# commit of the same bytes) on a server of its own: initdb and pg_ctl in a
# temporary directory, on a Unix socket, as the postgres user when run as
# root; fsync on, as a production server.
#   bench/micro/pg_commit.sh [REPS [--no-sync]]      (default 15)
#   DELAY_MS=X: over TCP through build/oo/bench/oo/delay_proxy, X ms each
#   way (0.25 gives a 0.5 ms round trip; bench/oo/oo1/pg_store.sh says more).
# Needs build/oo (cmake --build build/oo --target pg_commit_bench delay_proxy) and postgresql-15.
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
listen=""
[ -n "${DELAY_MS:-}" ] && listen=127.0.0.1
"${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -o "-k $dir -c listen_addresses=$listen -p $port" -l "$dir/log" -w start >/dev/null
proxy=""
trap '[ -n "$proxy" ] && kill $proxy; "${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -m fast stop >/dev/null; rm -rf "$dir"' EXIT
url="postgresql:///postgres?host=$dir&port=$port&user=steppe"
if [ -n "${DELAY_MS:-}" ]; then
  build/oo/bench/oo/delay_proxy $((port + 1)) 127.0.0.1 "$port" "$DELAY_MS" &
  proxy=$!
  sleep 0.5
  url="postgresql://steppe@127.0.0.1:$((port + 1))/postgres"
fi
${PERF:-} "$bench" "$url" --reps "${1:-15}" ${2:-}
