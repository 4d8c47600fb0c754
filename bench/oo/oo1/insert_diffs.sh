#!/usr/bin/env bash
# OO1 "insert 100 parts + commit", warm, with the log's sub-page differences
# on and off, against LMDB (issue 18 item 7; docs/benchmarks.md, "Sub-page
# differences"). Each run on a fresh copy of a generated database, OS caches
# dropped first (root); one JSON line per run appended to OUT.
#
#   bench/oo/oo1/insert_diffs.sh [BIN_DIR] [WORK_DIR] [OUT]
#   (defaults: build/oo/bench/oo/oo1, /var/tmp/insert-diffs, WORK_DIR/results.txt;
#   build it with `bench/run --experiment hosking-1995 --quick` or cmake --build build/oo --target oo1)
set -euo pipefail
bin="${1:-build/oo/bench/oo/oo1}/oo1"
work="${2:-/var/tmp/insert-diffs}"
out="${3:-$work/results.txt}"
mkdir -p "$work"
for size in 20000 200000; do
  for sys in steppe-uffd lmdb; do
    rm -rf "$work/$sys-$size"*
    "$bin" generate --system "$sys" --parts "$size" --path "$work/$sys-$size" >/dev/null
  done
  for round in 1 2 3; do
    for variant in "steppe-uffd on" "steppe-uffd off" "lmdb on"; do
      set -- $variant
      rm -rf "$work/run"*
      for f in "$work/$1-$size" "$work/$1-$size"-*; do
        [ -e "$f" ] && cp -r "$f" "$work/run${f#"$work/$1-$size"}"
      done
      sync
      [ -w /proc/sys/vm/drop_caches ] && echo 3 >/proc/sys/vm/drop_caches
      json=$("$bin" measure --system "$1" --parts "$size" --path "$work/run" --op insert --warm 9 --hot 0 \
             --log-diffs "$2" 2>/dev/null)
      echo "$size $1 diffs=$2 round=$round $json" >>"$out"
    done
  done
done
rm -rf "$work/run"*
echo "results: $out (per line: parts system diffs round, then oo1's JSON; warm commit_ms[1:], series.counters.warm)"
