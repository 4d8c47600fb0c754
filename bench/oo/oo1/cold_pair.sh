#!/usr/bin/env bash
# Cold OO1, two steppe builds against each other and LMDB, in one run: each
# build generates its own store (a store's log is as its build leaves it),
# then every round measures each system's open + first operation in a new
# process with the OS page cache dropped (as root), alternating. Prints one
# line per process and the medians (ms): open, the first operation, both,
# and the MB the process read (open + operation).
#   bench/oo/oo1/cold_pair.sh OLD_OO1 NEW_OO1 [PARTS] [ROUNDS] [OPS]
#   (default 20000 = OO1 small, 5 rounds, "traversal lookup"; DIR=/var/tmp/steppe-cold)
set -euo pipefail
old=$1 new=$2 parts=${3:-20000} rounds=${4:-5} ops=${5:-traversal lookup}
dir=${DIR:-/var/tmp/steppe-cold}
mkdir -p "$dir" && rm -rf "$dir"/old.db* "$dir"/new.db* "$dir"/lmdb.db*
[ "$(id -u)" = 0 ] || echo "not root: the page cache is not dropped, so these runs are warm, not cold" >&2
"$old" generate --system steppe-uffd --parts "$parts" --path "$dir/old.db" > /dev/null
"$new" generate --system steppe-uffd --parts "$parts" --path "$dir/new.db" > /dev/null
"$new" generate --system lmdb --parts "$parts" --path "$dir/lmdb.db" > /dev/null
one() {  # BIN SYSTEM PATH OP -> open op total MB
  if [ "$(id -u)" = 0 ]; then sync; echo 3 > /proc/sys/vm/drop_caches; fi
  "$1" measure --system "$2" --parts "$parts" --path "$3" --op "$4" --warm 1 --hot 0 > "$dir/m.json"
  python3 -c '
import json, sys
j = json.load(open(sys.argv[1])); s = j["series"]
mb = (j.get("open_counters", {}).get("read_bytes", 0) + s.get("counters", {}).get("cold", {}).get("read_bytes", 0)) / 1e6
print("%.2f %.2f %.2f %.2f" % (j["open_ms"], s["cold_ms"][0], j["open_ms"] + s["cold_ms"][0], mb))' "$dir/m.json"
}
for op in $ops; do
  : > "$dir/$op.txt"
  for r in $(seq "$rounds"); do
    echo "old $(one "$old" steppe-uffd "$dir/old.db" "$op")" >> "$dir/$op.txt"
    echo "new $(one "$new" steppe-uffd "$dir/new.db" "$op")" >> "$dir/$op.txt"
    echo "lmdb $(one "$new" lmdb "$dir/lmdb.db" "$op")" >> "$dir/$op.txt"
  done
  python3 - "$dir/$op.txt" "$op" <<'PY'
import sys, statistics
rows = {}
for line in open(sys.argv[1]):
    who, *v = line.split()
    rows.setdefault(who, []).append([float(x) for x in v])
print("%s (medians of %d): system | open | operation | open + operation | MB read" % (sys.argv[2], len(rows["old"])))
for who in ("old", "new", "lmdb"):
    cols = list(zip(*rows[who]))
    print("  %-4s | %s" % (who, " | ".join("%.2f" % statistics.median(c) for c in cols)))
PY
done
