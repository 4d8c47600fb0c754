#!/usr/bin/env bash
# Builds the storage fuzz targets with the `fuzz` preset (build/fuzz) and runs them.
#
#   tests/fuzz/run.sh [seconds]       replay tests/fuzz/crashes/<target>/* (past findings must
#                                     stay fixed), then fuzz each target for `seconds` (default 30)
#                                     on tests/fuzz/corpus/<target>/
#   tests/fuzz/run.sh --make-corpus   rebuild tests/fuzz/corpus/ from freshly built stores
#
# Exits non-zero on any finding (crash, sanitizer report, leak, hang > 10 s,
# exception other than steppe::error); the input is kept under
# build/fuzz/findings/<target>/. New corpus entries go to build/fuzz/corpus/<target>/,
# never into the source tree.
#
# Environment: STEPPE_FUZZ_CMAKE_ARGS  extra arguments for `cmake --preset fuzz`
#              STEPPE_FUZZ_ARGS        extra libFuzzer flags (e.g. -jobs=2 -workers=2)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$root/build/fuzz"
targets=(fuzz_open_store fuzz_wal_replay fuzz_open_engine)
seconds=30
mode=fuzz
case "${1:-}" in
  "") ;;
  --make-corpus) mode=corpus ;;
  *[!0-9]*) echo "usage: $0 [seconds] | --make-corpus" >&2; exit 2 ;;
  *) seconds=$1 ;;
esac

cd "$root"
# shellcheck disable=SC2086
cmake --preset fuzz ${STEPPE_FUZZ_CMAKE_ARGS:-} > /dev/null
cmake --build "$build" --target "${targets[@]}" -j 2

# UBSan checks compiled as recoverable must still stop the run; leaks are findings.
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:${ASAN_OPTIONS:-}"

if [[ $mode == corpus ]]; then
  for t in "${targets[@]}"; do
    dir="$root/tests/fuzz/corpus/$t"
    rm -rf "$dir"
    mkdir -p "$dir"
    STEPPE_FUZZ_MAKE_CORPUS="$dir" "$build/tests/fuzz/$t"
  done
  du -sh "$root/tests/fuzz/corpus"
  exit 0
fi

failed=()
for t in "${targets[@]}"; do
  bin="$build/tests/fuzz/$t"
  # 1. Regressions: every saved crash input, each on its own.
  shopt -s nullglob
  for input in "$root/tests/fuzz/crashes/$t"/*; do
    if ! "$bin" -timeout=10 -rss_limit_mb=2048 "$input" > "$build/regression.log" 2>&1; then
      echo "FINDING: $t still fails on $input:" >&2
      grep -E "BUG|ERROR|SUMMARY|timeout|out-of-memory" "$build/regression.log" | head -5 >&2 || true
      failed+=("$t:$(basename "$input")")
    fi
  done
  shopt -u nullglob

  # 2. Fuzz.
  work="$build/corpus/$t"
  findings="$build/findings/$t"
  mkdir -p "$work" "$findings"
  echo "== $t: ${seconds}s"
  # shellcheck disable=SC2086
  if ! "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$findings/" ${STEPPE_FUZZ_ARGS:-} "$work" "$root/tests/fuzz/corpus/$t" \
       > "$build/$t.log" 2>&1; then
    echo "FINDING: $t (log: $build/$t.log, input under $findings/):" >&2
    grep -E "BUG|ERROR|SUMMARY|Test unit written|timeout|out-of-memory" "$build/$t.log" | head -8 >&2 || true
    failed+=("$t")
  fi
  grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|^#[0-9]+.*DONE" "$build/$t.log" || true
done

if (( ${#failed[@]} )); then
  echo "fuzz: findings in: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: no findings"
