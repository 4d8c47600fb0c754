#!/usr/bin/env bash
# pg_commit_bench (a store's commit in PostgreSQL against PostgreSQL's own
# commit of the same bytes) on a server of its own: initdb and pg_ctl in a
# temporary directory, on a Unix socket, as the postgres user when run as
# root; fsync on, as a production server.
#   bench/micro/pg_commit.sh [REPS [--no-sync]]      (default 15)
#   DELAY_MS=X: over TCP through build/oo/bench/oo/delay_proxy, X ms each
#   way (0.25 gives a 0.5 ms round trip; bench/pg_server.sh).
# Needs build/oo (cmake --build build/oo --target pg_commit_bench delay_proxy) and postgresql-15.
set -euo pipefail
cd "$(dirname "$0")/../.."
bench=build/oo/bench/micro/pg_commit_bench
[ -x "$bench" ] || { echo "build it first: cmake --build build/oo --target pg_commit_bench" >&2; exit 2; }
source bench/pg_server.sh
start_pg_server /var/tmp/steppe-pgcommit-XXXXXX
${PERF:-} "$bench" "$url" --reps "${1:-15}" ${2:-}
