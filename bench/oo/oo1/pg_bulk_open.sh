#!/usr/bin/env bash
# The opens right after a bulk load into PostgreSQL (docs/benchmarks.md,
# "Since: a bulk load's writer vacuums the table itself"): a fresh server on
# a Unix socket (bench/pg_server.sh), `oo1 generate` of PARTS parts into it,
# timed, then OPENS opens of the store at once, each in a new process with
# the OS page cache dropped (as root), each the open of `oo1 measure --op
# lookup` (open_ms). The server logs VACUUM's duration, printed at the end.
#   bench/oo/oo1/pg_bulk_open.sh [PARTS] [OPENS] [OO1]  (default 2000000 = OO1 huge, 3, build/oo's)
set -euo pipefail
cd "$(dirname "$0")/../../.."
parts=${1:-2000000}
opens=${2:-3}
oo1=${3:-build/oo/bench/oo/oo1/oo1}
[ -x "$oo1" ] || { echo "build oo1 first: cmake --build build/oo --target oo1" >&2; exit 2; }
source bench/pg_server.sh
start_pg_server /tmp/steppe-pgbulk-XXXXXX
psql() { "${as_pg[@]}" "$bin/psql" -X -q -At -h "$dir" -p "$port" -U steppe -d postgres "$@"; }
psql -c "ALTER SYSTEM SET log_min_duration_statement = 0" -c "SELECT pg_reload_conf()" > /dev/null
u="$(url_with store=oo1)&cache_file=$dir/pg-pages"
start=$(date +%s%N)
"$oo1" generate --system steppe-uffd --parts "$parts" --path "$u" > "$dir/gen.json"
echo "generate: $(( ($(date +%s%N) - start) / 1000000 )) ms"
for i in $(seq "$opens"); do
  if [ "$(id -u)" = 0 ]; then sync; echo 3 > /proc/sys/vm/drop_caches; fi
  "$oo1" measure --system steppe-uffd --parts "$parts" --path "$u" --op lookup --warm 0 --hot 0 > "$dir/m.json"
  python3 -c 'import json,sys; print("open %d: %.1f ms" % (int(sys.argv[2]), json.load(open(sys.argv[1]))["open_ms"]))' "$dir/m.json" "$i"
done
echo "VACUUM: $(grep -o 'duration: [0-9.]* ms  execute [^:]*: VACUUM' "$dir/log" || echo none)"
echo "autovacuum ran: $(psql -c "SELECT last_autovacuum IS NOT NULL FROM pg_stat_user_tables WHERE relname = 'steppe_page'")"
