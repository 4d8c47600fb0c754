#!/usr/bin/env bash
# OO1 on a store in PostgreSQL against the same store in a local file, in one
# run (issue 20's measurement): a server is started on a Unix socket in a
# temporary directory (initdb, pg_ctl; as the postgres user when run as
# root), both stores are generated, then each operation is measured
# alternately, ROUNDS times, each in a new process: the open, cold (the first
# iteration; the OS page cache dropped before each process when run as root,
# the server's own buffers kept), warm (the median of the next 9), hot (the
# median of 10 repeats). Medians over the rounds.
#   bench/oo/oo1/pg_store.sh [PARTS] [ROUNDS]     (default 200000 = OO1 large, 3)
#   PG_CACHE=file (default): the PostgreSQL store keeps its cache file of
#   verified pages ($dir/pg-pages, filled by generate's commits) across the
#   processes, as a user's would; PG_CACHE=empty deletes it before each
#   measured process (every process starts cold); PG_CACHE=none runs
#   without one (cache_file_mib=0).
#   DELAY_MS=X: steppe reaches the server over TCP through
#   build/oo/bench/oo/delay_proxy (bench/oo/harness/delay_proxy.cpp), which delays each direction by X ms
#   (0.25 gives a 0.5 ms round trip); DELAY_MS=0 measures the proxy alone.
# Needs build/oo (bench/run builds it) and postgresql-15.
set -euo pipefail
cd "$(dirname "$0")/../../.."
parts=${1:-200000}
rounds=${2:-3}
oo1=build/oo/bench/oo/oo1/oo1
[ -x "$oo1" ] || { echo "build oo1 first: cmake --build build/oo --target oo1" >&2; exit 2; }
source bench/pg_server.sh
start_pg_server /tmp/steppe-pgbench-XXXXXX
pg_cache=${PG_CACHE:-file}
cache_param="&cache_file=$dir/pg-pages"
[ "$pg_cache" = none ] && cache_param="&cache_file_mib=0"
url="$(url_with store=oo1)$cache_param"
file="$dir/oo1.db"
drop_caches() { if [ "$(id -u)" = 0 ]; then sync; echo 3 > /proc/sys/vm/drop_caches; fi; }
for where in file url; do
  "$oo1" generate --system steppe-uffd --parts "$parts" --path "${!where}" > "$dir/gen-$where.json"
done
psql() { "$bin/psql" -X -q -At -h "$dir" -p "$port" -U steppe -d postgres -c "$1"; }
# Inserts change the store: each measures a pristine copy (a file copy; rows
# copied in SQL, under a new store_id: a copy is another store, and its pages
# are not in the cache file; vacuumed, as the original was).
pristine() {
  if [ "$1" = file ]; then
    rm -f "$dir/ins.db" "$dir/ins.db-wal"; cp "$file" "$dir/ins.db"; echo "$dir/ins.db"
  else
    psql "DELETE FROM steppe_page WHERE store = 'ins'; DELETE FROM steppe_store WHERE name = 'ins';
          INSERT INTO steppe_page SELECT 'ins', page, txn, sum, image FROM steppe_page WHERE store = 'oo1';
          INSERT INTO steppe_store (name, store_id, format, txn, page_count, meta, fence, digest)
            SELECT 'ins', md5(random()::text), format, txn, page_count, meta, fence, digest FROM steppe_store
            WHERE name = 'oo1'"
    psql "VACUUM steppe_page"  # as the original's rows were (by generate's bulk load): the open's scan reads the index alone
    echo "${url/store=oo1/store=ins}"
  fi
}
for r in $(seq "$rounds"); do
  for op in traversal lookup insert; do
    for where in file url; do
      path=${!where}
      [ "$op" = insert ] && path=$(pristine "$where")
      [ "$where" = url ] && [ "$pg_cache" = empty ] && rm -f "$dir/pg-pages"
      drop_caches
      "$oo1" measure --system steppe-uffd --parts "$parts" --path "$path" --op "$op" > "$dir/m-$where-$op-$r.json"
    done
  done
done
python3 - "$dir" "$rounds" <<'PY'
import json, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
def get(where, op, key):
    vals = []
    for r in range(1, rounds + 1):
        j = json.load(open(f"{d}/m-{where}-{op}-{r}.json"))
        v = j[key] if key in j else j["series"][key]
        if isinstance(v, list) and not v:
            raise KeyError(key)
        vals.append(statistics.median(v) if isinstance(v, list) else v)
    return statistics.median(vals)
print("| OO1 | phase | local file (ms) | PostgreSQL (ms) | ratio |")
print("|---|---|---|---|---|")
for op in ("traversal", "lookup", "insert"):
    for phase, key in (("open", "open_ms"), ("cold", "cold_ms"), ("warm", "warm_ms"), ("hot", "hot_ms")):
        try:
            f, u = get("file", op, key), get("url", op, key)
        except KeyError:
            continue
        print(f"| {op} | {phase} | {f:.3f} | {u:.3f} | {u / f:.2f} |")
def trips(op, phase):  # the PostgreSQL store's round trips in a phase (store_stats)
    vals = [json.load(open(f"{d}/m-url-{op}-{r}.json"))["series"].get("counters", {}).get(phase, {}).get("server_round_trips")
            for r in range(1, rounds + 1)]
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None
print()
print("| OO1 on PostgreSQL | round trips, cold | round trips, warm (all iterations) |")
print("|---|---|---|")
for op in ("traversal", "lookup", "insert"):
    print(f"| {op} | {trips(op, 'cold')} | {trips(op, 'warm')} |")
PY
