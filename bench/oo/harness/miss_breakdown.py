#!/usr/bin/env python3
"""miss_breakdown.py — what one page-engine miss costs, split into its parts
(issue 18 item 1), on OO1 warm traversals and cold opens.

For each backend (uffd, mprotect) and each oo1 executable given (two builds
compare a change: they are alternated round by round), it runs `oo1 measure
--op traversal` on a store it generates once, and reports per warm fault
(medians over rounds):

  wall      the warm iterations' time / the faults they took: everything a
            miss costs the program, the traversal's own work included
  fill      the fault space's fill time (vm: the callback and the install)
    io        storage: the page read and its checksum (page cache warm)
    swizzle   the pointer and vtable words checked and translated
    handler   the rest of fill: page map, budget, install (UFFDIO_COPY or
              mprotect), the clean page's checksum, bookkeeping
  trap      wall - fill: the fault's delivery (kernel, signal, return) and
            the traversal itself

With --cold (root: drops the page cache before each process), also the open:
milliseconds and bytes read.

Usage: miss_breakdown.py --oo1 BUILD/oo1 [--oo1 OTHER/oo1] [--parts 2000000]
                         [--dir /var/tmp] [--rounds 3] [--cold]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from oo_bench import drop_caches  # noqa: E402

BACKENDS = ('uffd', 'mprotect')


def measure(oo1, backend, parts, path, cold):
    if cold and not drop_caches():
        sys.exit('miss_breakdown: --cold needs root (/proc/sys/vm/drop_caches)')
    cmd = [oo1, 'measure', '--system', 'steppe-' + backend, '--parts', str(parts), '--path', path,
           '--op', 'traversal', '--warm', '9', '--hot', '1', '--slope', '0', '--no-pair']
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    j = json.loads(out)
    s = j['series']
    c = s['counters']['warm']
    faults = max(1, c['store_faults'])
    fill = c['miss_handler_ns'] + c['miss_io_ns'] + c['miss_swizzle_ns']
    wall = sum(s['warm_ms']) * 1e6
    return {
        'warm_ms': statistics.median(s['warm_ms']),
        'faults': c['store_faults'],
        'wall': wall / faults / 1e3,
        'fill': fill / faults / 1e3,
        'io': c['miss_io_ns'] / faults / 1e3,
        'swizzle': c['miss_swizzle_ns'] / faults / 1e3,
        'handler': c['miss_handler_ns'] / faults / 1e3,
        'trap': (wall - fill) / faults / 1e3,
        'open_ms': j['open_ms'],
        'open_mb': j['open_counters']['read_bytes'] / 1e6,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--oo1', action='append', required=True, help='an oo1 executable (repeat to compare builds)')
    ap.add_argument('--parts', type=int, default=2_000_000)
    ap.add_argument('--dir', default='/var/tmp')
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--cold', action='store_true')
    a = ap.parse_args()
    path = os.path.join(a.dir, f'miss_breakdown_{a.parts}.db')
    for suffix in ('', '-wal', '-shm', '-lock'):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    subprocess.run([a.oo1[0], 'generate', '--system', 'steppe-uffd', '--parts', str(a.parts), '--path', path],
                   check=True, capture_output=True)
    rows = {}
    for _ in range(a.rounds):
        for backend in BACKENDS:
            for oo1 in a.oo1:
                rows.setdefault((backend, oo1), []).append(measure(oo1, backend, a.parts, path, a.cold))
    keys = ('warm_ms', 'faults', 'wall', 'trap', 'fill', 'io', 'swizzle', 'handler', 'open_ms', 'open_mb')
    print(f'OO1 {a.parts:,} parts, warm traversal (9 iterations), medians of {a.rounds} rounds; '
          f'per warm fault in microseconds; page cache {"dropped before each process" if a.cold else "warm"}')
    print('| backend | build | ' + ' | '.join(keys) + ' |')
    print('|---|---|' + '---:|' * len(keys))
    for (backend, oo1), samples in rows.items():
        med = {k: statistics.median(s[k] for s in samples) for k in keys}
        cells = [f'{med[k]:.0f}' if k == 'faults' else f'{med[k]:.2f}' for k in keys]
        print(f'| {backend} | {oo1} | ' + ' | '.join(cells) + ' |')
    for suffix in ('', '-wal', '-shm', '-lock'):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)


if __name__ == '__main__':
    main()
