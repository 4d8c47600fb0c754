#!/usr/bin/env bash
# What starting a program that links steppe costs, against an empty one:
# the wall time of the whole process (the steppe CLI printing its usage, and
# /bin/true), medians of N runs with the page cache warm, and the shared
# libraries each maps (ldd). libpq is loaded only when a store in
# PostgreSQL is opened (src/storage/libpq.hpp); linked, it and the 22
# libraries it needs made every program start 2.8 ms slower
# (docs/benchmarks.md, "Starting a process without libpq").
#   bench/micro/process_start.sh [STEPPE_CLI] [RUNS]
set -euo pipefail
cli=${1:-$(dirname "$0")/../../build/user/tools/steppe}
runs=${2:-60}
[ -x "$cli" ] || { echo "no steppe CLI at $cli (cmake --preset user && cmake --build --preset user)" >&2; exit 2; }
python3 - "$cli" "$runs" <<'PY'
import statistics, subprocess, sys, time
cli, runs = sys.argv[1], int(sys.argv[2])
def median_ms(argv):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)
def libraries(path):
    out = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
    return len([line for line in out.splitlines() if line.strip()]), "libpq" in out
for name, argv in (("/bin/true", ["/bin/true"]), ("steppe (usage)", [cli])):
    count, pq = libraries(argv[0])
    print(f"{name:16} median {median_ms(argv):6.2f} ms of {runs} runs, {count} libraries (ldd){', libpq among them' if pq else ''}")
PY
