#!/usr/bin/env python3
"""oo_bench.py — drives the OO1 and OO7 benchmarks (bench/run is the entry point).

For each benchmark and size it
  1. generates one store per store family (steppe, Boost.Interprocess,
     libpmemobj, LMDB; transient builds in its measuring process),
  2. runs every (operation, system) in a fresh process, rounds x operations x
     systems, the system order rotating each round so that machine noise hits
     every system alike; the OS caches are dropped before each process (cold),
  3. checks that every system computed the same answers (visit counts,
     lookup hits, query results, checksums) and fails loudly if not,
  4. for updating operations runs on a copy of the pristine store and then
     reopens the copy in another process to verify what was committed,
  5. writes results.json (every raw sample), report.md (medians, spread,
     ratios, counters, the goals) and PNG plots.

Exit status: 0 when every self-check passed, 1 on any mismatch or failure.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))                  # bench/oo/harness
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))    # the repository

# objects-*: steppe's object engine, one scheme per executable (oo1_objects_fb, _id,
# _idsh, _pf, oo7_objects_fb, _id, _idsh, _pf; the oo1 and oo7 executables hand these
# systems to them). A store records the scheme it was made with, so each scheme
# is its own store family.
OBJECT_SYSTEMS = ['objects-fb', 'objects-id', 'objects-idsh', 'objects-pf']
# steppe-load: the uffd backend with open_options::load_ahead (a thread loads
# the store's pages ahead of use when they fit in a quarter of the budget).
STEPPE_SYSTEMS = ['steppe-uffd', 'steppe-mprotect', 'steppe-load']
SYSTEMS = ['transient'] + STEPPE_SYSTEMS + OBJECT_SYSTEMS + ['bip', 'pmem', 'pmem-nd', 'lmdb']
# fault_block with the other write barriers (oo1_objects_fb_flag, _fb_remset,
# _fb_pages; OO1 only): the experiments' write-barrier study runs them, the
# main harness does not (not in SYSTEMS).
BARRIER_SYSTEMS = ['objects-fb-flag', 'objects-fb-remset', 'objects-fb-pages']
FAMILY = {'transient': None, 'steppe-uffd': 'steppe', 'steppe-mprotect': 'steppe', 'steppe-load': 'steppe', 'bip': 'bip',
          'pmem': 'pmem', 'pmem-nd': 'pmem', 'lmdb': 'lmdb', **{s: s for s in OBJECT_SYSTEMS + BARRIER_SYSTEMS}}
GEN_SYSTEM = {'steppe': 'steppe-uffd', 'bip': 'bip', 'pmem': 'pmem', 'lmdb': 'lmdb',
              **{s: s for s in OBJECT_SYSTEMS + BARRIER_SYSTEMS}}
FAMILY_SUFFIXES = {'steppe': ['', '-wal'], 'bip': [''], 'pmem': [''], 'lmdb': ['', '-lock'],
                   **{s: ['', '-wal'] for s in OBJECT_SYSTEMS + BARRIER_SYSTEMS}}
LABEL = {
    'transient': 'transient (std::allocator)',
    'steppe-uffd': 'steppe (uffd)',
    'steppe-mprotect': 'steppe (mprotect)',
    'steppe-load': 'steppe (uffd, load_ahead)',
    'objects-fb': 'steppe objects (fault_block + cards)',
    'objects-id': 'steppe objects (id + cards)',
    'objects-idsh': 'steppe objects (id_self_heal + cards)',
    'objects-pf': 'steppe objects (page_fault + cards)',
    'objects-fb-flag': 'steppe objects (fault_block + object_flag)',
    'objects-fb-remset': 'steppe objects (fault_block + remembered_set)',
    'objects-fb-pages': 'steppe objects (fault_block + pages)',
    'bip': 'Boost.Interprocess',
    'pmem': 'libpmemobj (durable)',
    'pmem-nd': 'libpmemobj (PMEM_IS_PMEM_FORCE=1, NOT durable)',
    'lmdb': 'LMDB',
}
SHORT = {'transient': 'transient', 'steppe-uffd': 'steppe-uffd', 'steppe-mprotect': 'steppe-mprot', 'steppe-load': 'steppe-load',
         'objects-fb': 'objects-fb', 'objects-id': 'objects-id', 'objects-idsh': 'objects-idsh', 'objects-pf': 'objects-pf',
         'objects-fb-flag': 'objects-fb-flag', 'objects-fb-remset': 'objects-fb-remset',
         'objects-fb-pages': 'objects-fb-pages', 'bip': 'BIP', 'pmem': 'pmemobj', 'pmem-nd': 'pmemobj-ND', 'lmdb': 'LMDB'}
PEERS = ['bip', 'pmem', 'lmdb']  # durable peers for the goals (pmem-nd is reported, not a goal peer)


class Bench:
    """What differs between OO1 and OO7 for the driver."""

    def __init__(self, name, ops, update_ops, sizes, size_args, verify_args, traversal_ops, labels,
                 unsupported=None):
        self.name, self.ops, self.update_ops, self.sizes = name, ops, update_ops, sizes
        self.unsupported = unsupported or {}  # system -> why it is not run
        self.size_args, self.verify_args = size_args, verify_args
        self.traversal_ops = traversal_ops  # ops the "traversal" goals are judged on
        self.labels = labels


OO1_PARTS = {'small': 20000, 'large': 200000, 'huge': 2000000}
OO1 = Bench(
    'oo1', ['lookup', 'traversal', 'reverse', 'insert'], {'insert'}, OO1_PARTS,
    lambda size: ['--parts', str(OO1_PARTS[size])],
    lambda size, op, iterations: ['--parts', str(OO1_PARTS[size]),
                                  '--max-id', str(OO1_PARTS[size] + 100 * iterations)],
    ['traversal', 'reverse'],
    {'lookup': 'lookup (1,000 ids)', 'traversal': 'traversal (3,280 visits)',
     'reverse': 'reverse traversal', 'insert': 'insert 100 + commit'})

OO7_SIZES = {'small': 'small', 'medium': 'medium'}
OO7 = Bench(
    'oo7', ['t1', 't2a', 't2b', 't2c', 't6', 'q1', 'q4', 'insert', 'delete'],
    {'t2a', 't2b', 't2c', 'insert', 'delete'}, OO7_SIZES,
    lambda size: ['--config', size],
    lambda size, op, iterations: ['--config', size, '--after', op, '--iterations', str(iterations)],
    ['t1', 't6'],
    {'t1': 'T1 full traversal', 't2a': 'T2a (update roots) + commit', 't2b': 'T2b (update all) + commit',
     't2c': 'T2c (update all x4) + commit', 't6': 'T6 sparse traversal', 'q1': 'Q1 10 lookups',
     'q4': 'Q4 document lookups', 'insert': 'insert 5 composites + commit',
     'delete': 'delete 5 composites + commit'})


# ---- environment ------------------------------------------------------------------------

def log(msg):
    print(msg, file=sys.stderr, flush=True)


def drop_caches():
    os.sync()
    try:
        with open('/proc/sys/vm/drop_caches', 'w') as f:
            f.write('3\n')
        return True
    except OSError:
        return False


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception:
        return ''


def machine_info(store_dir):
    cpu = ''
    try:
        for line in open('/proc/cpuinfo'):
            if line.startswith('model name'):
                cpu = line.split(':', 1)[1].strip()
                break
    except OSError:
        pass
    mem = ''
    try:
        for line in open('/proc/meminfo'):
            if line.startswith('MemTotal'):
                mem = '%.1f GiB' % (int(line.split()[1]) / 1048576)
    except OSError:
        pass
    return {
        'kernel': platform.release(),
        'cpu': cpu,
        'cpus': os.cpu_count(),
        'memory': mem,
        'virtualization': sh('systemd-detect-virt 2>/dev/null') or sh("grep -o hypervisor /proc/cpuinfo | head -1"),
        'store_dir': store_dir,
        'filesystem': sh('stat -f -c %%T %s' % store_dir),
        'device': sh("df --output=source %s | tail -1" % store_dir),
        'compiler': sh('c++ --version | head -1'),
        'git_commit': sh('git -C %s rev-parse --short HEAD' % ROOT),
        'git_dirty': bool(sh('git -C %s status --porcelain -- src include bench' % ROOT)),
        'loadavg_start': open('/proc/loadavg').read().split()[:3],
    }


# ---- running the benchmark processes -------------------------------------------------------

class Runner:
    def __init__(self, args, binaries, budget_s):
        self.args, self.binaries, self.budget_s = args, binaries, budget_s
        self.failures, self.records, self.generated = [], [], []
        self.cold_ok = True
        self.slow = {}  # (bench, size, op, system) -> seconds: measured once, not repeated in later rounds
        self.skipped = []

    def run(self, bench, cmd, what, timeout=3600, show_stderr=False):
        full = [self.binaries[bench.name]] + cmd
        if self.args.nice:
            full = ['nice', '-n', str(self.args.nice)] + full
        env = dict(os.environ)
        if show_stderr:
            env['BENCH_PROGRESS'] = '1'
        t = time.time()
        try:
            p = subprocess.run(full, stdout=subprocess.PIPE, stderr=None if show_stderr else subprocess.PIPE,
                               text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            self.failures.append('%s: timed out after %d s' % (what, timeout))
            log('  FAIL %s: timed out' % what)
            return None
        if p.returncode != 0:
            tail = (p.stderr or '').strip().splitlines()[-5:] if not show_stderr else []
            self.failures.append('%s: exit %d: %s' % (what, p.returncode, ' | '.join(tail)))
            log('  FAIL %s (exit %d)\n    %s' % (what, p.returncode, '\n    '.join(tail)))
            return None
        try:
            rec = json.loads(p.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            self.failures.append('%s: no JSON output' % what)
            return None
        rec['wall_s'] = time.time() - t
        return rec

    def store_path(self, bench, size, family, work=False):
        d = os.path.join(self.args.store_dir, bench.name, size)
        os.makedirs(d, exist_ok=True)
        return os.path.join(d, ('work-' if work else '') + family + '.db')

    def generate(self, bench, size, families, extra=None):
        """`extra`: family -> more arguments for its generate (the experiments)."""
        for fam in families:
            path = self.store_path(bench, size, fam)
            log('[%s %s] generating the %s store' % (bench.name, size, fam))
            rec = self.run(bench, ['generate', '--system', GEN_SYSTEM[fam], '--path', path] + bench.size_args(size) +
                           list((extra or {}).get(fam, [])),
                           '%s %s generate %s' % (bench.name, size, fam), show_stderr=True)
            if rec:
                rec.update({'size_name': size, 'family': fam})
                self.generated.append(rec)
                log('  %.1f s, %.1f MiB' % (rec['generate_ms'] / 1000, rec['size']['file_allocated_bytes'] / 2**20))

    def copy_store(self, bench, size, fam):
        src, dst = self.store_path(bench, size, fam), self.store_path(bench, size, fam, work=True)
        for suf in FAMILY_SUFFIXES[fam]:
            if os.path.exists(dst + suf):
                os.remove(dst + suf)
            if os.path.exists(src + suf) and not suf.endswith('-lock'):
                subprocess.run(['cp', '--sparse=always', src + suf, dst + suf], check=True)
        return dst

    def measure(self, bench, size, op, system, rnd, cfg, variant=None, extra=(), path=None):
        """One measuring process. `variant` (default: the system) names a
        configuration of `system` run with the `extra` arguments (the
        experiments: e.g. objects-fb with --fetch object); it is the record's
        `system` from then on, so every report and the cross-system check
        treat it as a system of its own (the executable's name stays in
        `executable_system`). `path` overrides the store."""
        variant = variant or system
        key = (bench.name, size, op, variant)
        if key in self.slow:
            return
        fam = FAMILY[system]
        update = op in bench.update_ops
        if path is None:
            path = ''
            if fam:
                path = self.copy_store(bench, size, fam) if update else self.store_path(bench, size, fam)
        cold = drop_caches()
        self.cold_ok &= cold
        cmd = ['measure', '--system', system, '--op', op] + bench.size_args(size) + cfg + list(extra)
        if path:
            cmd += ['--path', path]
        what = '%s %s %s %s round %d' % (bench.name, size, op, variant, rnd)
        rec = self.run(bench, cmd, what)
        if not rec:
            return
        rec.update({'size_name': size, 'round': rnd, 'caches_dropped': cold})
        if variant != system:
            rec.update({'system': variant, 'executable_system': system})
        if rec['wall_s'] > 1.5 * self.budget_s:
            self.slow[key] = rec['wall_s']
            log('  (%s %s took %.0f s: not repeated in later rounds)' % (system, op, rec['wall_s']))
        if update and fam:
            iterations = len(rec['series']['results'])
            v = self.run(bench, ['verify', '--system', system, '--path', path] +
                         bench.verify_args(size, op, iterations), 'verify ' + what)
            rec['verified_after_reopen'] = bool(v and v.get('ok'))
            if v and rec.get('final_state') and v.get('state') != rec['final_state']:
                rec['verified_after_reopen'] = False
                self.failures.append('VERIFY %s: the reopened store traverses to %s, the committing process saw %s' % (
                    what, v.get('state'), rec['final_state']))
        self.records.append(rec)
        s = rec['series']
        hot = ' hot %.4f' % statistics.median(s['hot_ms']) if s.get('hot_ms') else ''
        log('  %-16s %-10s cold %9.3f ms  warm %9.3f ms%s' % (
            variant, op, s['cold_ms'][0], statistics.median(s['warm_ms']) if s['warm_ms'] else 0, hot))


# ---- cross-system checks ---------------------------------------------------------------------

def cross_check(records, failures):
    """Every system must compute the same answers for the same inputs."""
    groups = {}
    for r in records:
        groups.setdefault((r['bench'], r['size_name'], r['op']), []).append(r)
    checked = 0
    for key, recs in sorted(groups.items()):
        ref = recs[0]
        ref_res = ref['series']['results']
        for r in recs[1:]:
            # a slow system may stop early (the time budget): compare what both ran
            for i, (a, b) in enumerate(zip(ref_res, r['series']['results'])):
                if a != b:
                    failures.append('MISMATCH %s %s %s iteration %d: %s says %s, %s says %s' % (
                        key[0], key[1], key[2], i, ref['system'], a, r['system'], b))
                    break
            checked += 1
        for r in recs:
            if r.get('verified_after_reopen') is False:
                failures.append('VERIFY %s %s %s %s: the committed store did not verify after reopening' % (
                    key[0], key[1], key[2], r['system']))
    return checked


# ---- statistics ---------------------------------------------------------------------------------

def q(v, p):
    v = sorted(v)
    if not v:
        return None
    k = (len(v) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def summarize(vals):
    vals = [x for x in vals if x is not None]
    if not vals:
        return None
    return {'median': statistics.median(vals), 'p25': q(vals, .25), 'p75': q(vals, .75),
            'min': min(vals), 'max': max(vals), 'n': len(vals)}


def per_k_min(ks, ys):
    best = {}
    for k, y in zip(ks, ys):
        best[k] = min(best.get(k, y), y)
    return best


def pair_ratio(series):
    """Hot ratio to the transient copy measured in the same process,
    alternated: for each k the fastest of the passes (system and copy alike),
    then the median over k >= 4 of system / copy (such samples last long
    enough to stand above timer and scheduling noise)."""
    ks, ys, ps = series.get('slope_k', []), series.get('slope_ms', []), series.get('pair_transient_slope_samples', [])
    if not ps:
        return None
    a, b = per_k_min(ks, ys), per_k_min(ks, ps)
    rs = [a[k] / b[k] for k in a if k >= 4 and b.get(k, 0) > 0] or [a[k] / b[k] for k in a if b.get(k, 0) > 0]
    return statistics.median(rs) if rs else None


def aggregate(records, bench):
    """-> {size: {op: {system: summary}}}"""
    out = {}
    for r in records:
        if r['bench'] != bench.name:
            continue
        s = r['series']
        d = out.setdefault(r['size_name'], {}).setdefault(r['op'], {}).setdefault(r['system'], {
            'cold': [], 'cold_open': [], 'warm': [], 'hot': [], 'slope': [], 'pair': [], 'open': [], 'rss': [], 'commit_cold': [],
            'commit_warm': [], 'counters': [], 'files': None, 'caches_dropped': True, 'describe': r.get('describe', ''),
            'backend': r.get('backend', ''), 'extra': []})
        d['cold'].append(s['cold_ms'][0])
        d['cold_open'].append(s['cold_ms'][0] + r.get('open_ms', 0))
        d['warm'].extend(s['warm_ms'])
        d['hot'].extend(s.get('hot_ms', []))
        if s.get('hot_slope_ms') is not None:
            d['slope'].append(s['hot_slope_ms'])
        pr = pair_ratio(s)
        if pr is not None:
            d['pair'].append(pr)
        d['open'].append(r.get('open_ms', 0))
        d['rss'].append(s.get('peak_rss_kib', 0))
        if r.get('commit_ms'):
            d['commit_cold'].append(r['commit_ms'][0])
            d['commit_warm'].extend(r['commit_ms'][1:])
        c = dict(s['counters'])
        c['open'] = r.get('open_counters', {})
        d['counters'].append(c)
        d['files'] = r.get('size')
        d['caches_dropped'] &= r.get('caches_dropped', False)
        if r.get('answers'):
            d['extra'].append(r['answers'])
    summary = {}
    for size, ops in out.items():
        for op, systems in ops.items():
            for sysname, d in systems.items():
                warm_iters = max(1, len(d['warm']) // max(1, len(d['cold'])))
                cnt = {}
                for phase in ('open', 'cold', 'warm', 'hot'):
                    keys = set()
                    for c in d['counters']:
                        keys |= set(c.get(phase, {}).keys())
                    per = {}
                    for k in sorted(keys):
                        vals = [c[phase].get(k, 0) for c in d['counters'] if phase in c]
                        div = warm_iters if phase == 'warm' else 1
                        per[k] = statistics.median(vals) / div if vals else 0
                    cnt[phase] = per
                summary.setdefault(size, {}).setdefault(op, {})[sysname] = {
                    'cold': summarize(d['cold']), 'cold_open': summarize(d['cold_open']), 'warm': summarize(d['warm']), 'hot': summarize(d['hot']),
                    'hot_slope': summarize(d['slope']), 'hot_pair_ratio': summarize(d['pair']),
                    'open_ms': summarize(d['open']), 'peak_rss_kib': summarize(d['rss']),
                    'commit_cold': summarize(d['commit_cold']), 'commit_warm': summarize(d['commit_warm']),
                    'counters_per_iteration': cnt, 'files': d['files'], 'caches_dropped': d['caches_dropped'],
                    'describe': d['describe'], 'backend': d['backend']}
    return summary


# ---- report ---------------------------------------------------------------------------------------

def fmt_ms(x):
    if x is None:
        return '–'
    if x >= 100:
        return '%.0f' % x
    if x >= 10:
        return '%.1f' % x
    if x >= 1:
        return '%.2f' % x
    if x >= 0.1:
        return '%.3f' % x
    return '%.4f' % x


def fmt_ratio(x):
    return '–' if x is None else ('%.2f×' % x if x < 100 else '%.0f×' % x)


def fmt_bytes(b):
    if b is None:
        return '–'
    for unit, div in (('GiB', 2**30), ('MiB', 2**20), ('KiB', 2**10)):
        if b >= div:
            return '%.1f %s' % (b / div, unit)
    return '%d B' % b


def med(s, phase):
    x = s.get(phase) if s else None
    return x['median'] if x else None


def spread(s, phase):
    x = s.get(phase) if s else None
    if not x:
        return ''
    if x['n'] < 2:
        return ''
    return ' [%s–%s]' % (fmt_ms(x['p25']), fmt_ms(x['p75']))


def systems_in(summary_ops):
    present = set()
    for systems in summary_ops.values():
        present |= set(systems)
    return [s for s in SYSTEMS if s in present]


def report_bench(bench, summary, gens, lines, goals):
    for size in bench.sizes:
        if size not in summary:
            continue
        ops = summary[size]
        syss = systems_in(ops)
        cold_label = all(ops[o][s]['caches_dropped'] for o in ops for s in ops[o])
        lines.append('\n## %s %s\n' % (bench.name.upper(), size))
        g = [x for x in gens if x['bench'] == bench.name and x['size_name'] == size]
        if g:
            lines.append('Generation (one process per store; bulk load, then durable): ' + ', '.join(
                '%s %.1f s → %s on disk (%s)' % (
                    x['family'], x['generate_ms'] / 1000, fmt_bytes(x['size']['file_allocated_bytes']),
                    ' + '.join('%s %s' % (f, fmt_bytes(v[1])) for f, v in x['size'].get('files', {}).items()))
                for x in g) + '.\n')
        lines.append('Cold: %s.\n' % ('first iteration in a fresh process after `echo 3 > /proc/sys/vm/drop_caches`'
                                        if cold_label else '**not cold** (the OS caches could not be dropped)'))
        for phase, title in (('cold_open', 'cold: open + first operation (ms, median [p25–p75] over rounds)'),
                             ('cold', 'cold: first operation only (ms; the open may already have read the data)'),
                             ('warm', 'warm (ms, median [p25–p75] of all warm iterations)'),
                             ('hot_slope', 'hot (ms per operation: Hosking slope over k = 1…64 repeats, median '
                                           '[p25–p75] over rounds)')):
            lines.append('\n**%s**\n' % title)
            lines.append('| op | ' + ' | '.join(SHORT[s] for s in syss) + ' |')
            lines.append('|---|' + '---:|' * len(syss))
            for op in bench.ops:
                if op not in ops or (phase == 'hot_slope' and op in bench.update_ops):
                    continue
                row = []
                for s in syss:
                    x = ops[op].get(s)
                    row.append((fmt_ms(med(x, phase)) + spread(x, phase)) if x and med(x, phase) is not None else '–')
                lines.append('| %s | %s |' % (bench.labels[op], ' | '.join(row)))
        # ratios to transient
        lines.append('\n**ratio to transient**: warm (medians); hot-pair = system / transient copy in the same '
                     'process, alternated (the robust hot figure); hot-slope = ratio of the slopes above (separate '
                     'processes)\n')
        lines.append('| op | phase | ' + ' | '.join(SHORT[s] for s in syss if s != 'transient') + ' |')
        lines.append('|---|---|' + '---:|' * (len(syss) - 1))
        for op in bench.ops:
            if op not in ops or 'transient' not in ops[op]:
                continue
            t = ops[op]['transient']
            for phase in ('warm', 'hot-pair', 'hot-slope'):
                row = []
                for s in syss:
                    if s == 'transient':
                        continue
                    x = ops[op].get(s)
                    if not x:
                        row.append('–')
                    elif phase == 'warm':
                        a, b = med(x, 'warm'), med(t, 'warm')
                        row.append(fmt_ratio(a / b) if a is not None and b else '–')
                    elif phase == 'hot-slope':
                        a, b = med(x, 'hot_slope'), med(t, 'hot_slope')
                        row.append(fmt_ratio(a / b) if a and b and b > 0 else '–')
                    else:
                        row.append(fmt_ratio(med(x, 'hot_pair_ratio')))
                if all(c == '–' for c in row):
                    continue
                lines.append('| %s | %s | %s |' % (bench.labels[op], phase, ' | '.join(row)))
        # counters
        lines.append('\n**counters per iteration** (median; warm = per warm iteration): minor/major page faults, '
                     'store faults (steppe page engine: page faults, pages swizzled in; object engine: segment '
                     'faults, segments read by a dereference), storage bytes read / written (/proc/self/io), '
                     'syncs (fsync + fdatasync + msync(MS_SYNC) calls), peak RSS, store size on disk\n')
        lines.append('| op | system | phase | minflt | majflt | store faults | read | written | syncs | peak RSS | store |')
        lines.append('|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|')
        for op in bench.ops:
            if op not in ops:
                continue
            for s in syss:
                x = ops[op].get(s)
                if not x:
                    continue
                for phase in ('open', 'cold', 'warm'):
                    if s == 'transient' and phase == 'open':
                        continue
                    c = x['counters_per_iteration'][phase]
                    files = x['files'] or {}
                    lines.append('| %s | %s | %s | %.0f | %.0f | %s | %s | %s | %s | %s | %s |' % (
                        op, SHORT[s], phase, c.get('minflt', 0), c.get('majflt', 0),
                        '%.0f' % c['store_faults'] if 'store_faults' in c else
                        '%.0f' % c['segment_faults'] if 'segment_faults' in c else '–',
                        fmt_bytes(c.get('read_bytes', 0)), fmt_bytes(c.get('write_bytes', 0)),
                        '%.1f' % c.get('syncs', 0) if c.get('syncs', 0) % 1 else '%.0f' % c.get('syncs', 0),
                        fmt_bytes(x['peak_rss_kib']['median'] * 1024) if x.get('peak_rss_kib') else '–',
                        fmt_bytes(files.get('file_allocated_bytes')) if files else '–'))
        # the object engine's own counters (so::store::stats())
        osys = [s for s in syss if s in OBJECT_SYSTEMS]
        if osys:
            keys = [('segment_faults', 'segment faults'), ('objects_faulted', 'objects faulted'),
                    ('fault_blocks', 'fault blocks'), ('refs_swizzled', 'refs swizzled'), ('commits', 'commits'),
                    ('objects_written', 'objects written'), ('segments_written', 'segments written'),
                    ('bytes_logged', 'logged')]
            lines.append('\n**object engine counters per iteration** (median; `so::store::stats()`; warm = per warm '
                         'iteration)\n')
            lines.append('| op | system | phase | ' + ' | '.join(k[1] for k in keys) + ' |')
            lines.append('|---|---|---|' + '---:|' * len(keys))
            for op in bench.ops:
                for s in osys:
                    x = ops.get(op, {}).get(s)
                    if not x:
                        continue
                    for phase in ('cold', 'warm', 'hot'):  # the open records no engine counters
                        c = x['counters_per_iteration'].get(phase) or {}
                        if not c or (phase == 'hot' and op in bench.update_ops):
                            continue
                        lines.append('| %s | %s | %s | %s |' % (op, SHORT[s], phase, ' | '.join(
                            fmt_bytes(c.get(k, 0)) if k == 'bytes_logged' else
                            ('%.1f' % c.get(k, 0) if c.get(k, 0) % 1 else '%.0f' % c.get(k, 0)) for k, _ in keys)))
        # open and commit
        upd = [op for op in bench.ops if op in bench.update_ops and op in ops]
        if upd:
            lines.append('\n**commit share of the update operations** (ms, median; cold = first in the process)\n')
            lines.append('| op | ' + ' | '.join(SHORT[s] for s in syss) + ' |')
            lines.append('|---|' + '---:|' * len(syss))
            for op in upd:
                lines.append('| %s | %s |' % (bench.labels[op], ' | '.join(
                    '%s / %s' % (fmt_ms(med(ops[op].get(s), 'commit_cold')), fmt_ms(med(ops[op].get(s), 'commit_warm')))
                    if ops[op].get(s) else '–' for s in syss)))
        lines.append('\n**open** (ms, median): ' + ', '.join(
            '%s %s' % (SHORT[s], fmt_ms(statistics.median([ops[o][s]['open_ms']['median'] for o in ops if s in ops[o]])))
            for s in syss if s != 'transient') + '\n')
        judge_goals(bench, size, ops, goals)


def judge_goals(bench, size, ops, goals):
    """The issue's goals, judged on the medians of this run."""
    def add(goal, ok, detail):
        goals.append({'bench': bench.name, 'size': size, 'goal': goal, 'ok': ok, 'detail': detail})

    hot_op = 'traversal' if bench.name == 'oo1' else 't1'
    if hot_op in ops and 'transient' in ops[hot_op]:
        for s in STEPPE_SYSTEMS:
            x = ops[hot_op].get(s)
            if not x:
                continue
            pr = med(x, 'hot_pair_ratio')
            sl, tsl = med(x, 'hot_slope'), med(ops[hot_op]['transient'], 'hot_slope')
            sr = sl / tsl if sl and tsl and tsl > 0 else None
            add('%s hot %s ≤ 1.02× transient' % (s, hot_op), pr is not None and pr <= 1.02,
                'same-process ratio %s; cross-process slope ratio %s' % (fmt_ratio(pr), fmt_ratio(sr)))
    for op in bench.traversal_ops:
        if op not in ops:
            continue
        for s in STEPPE_SYSTEMS:
            x = ops[op].get(s)
            if not x:
                continue
            # hot: each system against the transient copy in its own process (the
            # same yardstick, measured under the same conditions); slopes beside
            mine = med(x, 'hot_pair_ratio')
            peers = {p: med(ops[op][p], 'hot_pair_ratio') for p in PEERS
                     if p in ops[op] and med(ops[op][p], 'hot_pair_ratio')}
            if peers and mine is not None:
                best = min(peers, key=peers.get)
                add('%s hot %s faster than every peer' % (s, op), mine < peers[best],
                    '%s vs best peer %s %s of transient (slopes %s vs %s ms)' % (
                        fmt_ratio(mine), SHORT[best], fmt_ratio(peers[best]), fmt_ms(med(x, 'hot_slope')),
                        fmt_ms(med(ops[op][best], 'hot_slope'))))
            mine = med(x, 'warm')
            peers = {p: med(ops[op][p], 'warm') for p in PEERS if p in ops[op] and med(ops[op][p], 'warm')}
            if peers and mine is not None:
                best = min(peers, key=peers.get)
                add('%s warm %s faster than every peer' % (s, op), mine < peers[best],
                    '%s ms vs best peer %s %s ms' % (fmt_ms(mine), SHORT[best], fmt_ms(peers[best])))
            mine = med(x, 'cold_open')
            peers = {p: med(ops[op][p], 'cold_open') for p in PEERS if p in ops[op] and med(ops[op][p], 'cold_open')}
            if peers and mine is not None:
                best = min(peers, key=peers.get)
                add('%s cold %s (open + op) within 1.5× of the fastest peer' % (s, op), mine <= 1.5 * peers[best],
                    '%s ms = %s of %s %s ms (op alone: %s vs %s ms)' % (
                        fmt_ms(mine), fmt_ratio(mine / peers[best]), SHORT[best], fmt_ms(peers[best]),
                        fmt_ms(med(x, 'cold')), fmt_ms(med(ops[op][best], 'cold'))))
    ins = 'insert'
    if ins in ops:
        for s in STEPPE_SYSTEMS:
            x = ops[ins].get(s)
            if not x:
                continue
            for p in ('pmem', 'lmdb'):
                y = ops[ins].get(p)
                if not y:
                    continue
                a, b = med(x, 'warm'), med(y, 'warm')
                add('%s insert+commit faster than %s' % (s, SHORT[p]), a is not None and b is not None and a < b,
                    'warm %s ms vs %s ms (cold %s vs %s)' % (fmt_ms(a), fmt_ms(b), fmt_ms(med(x, 'cold')),
                                                             fmt_ms(med(y, 'cold'))))


def write_report(path, meta, summaries, gens, failures, checked, benches, plots):
    lines = ['# OO1 / OO7 results\n']
    m = meta['machine']
    lines.append('Run %s, mode `%s`, %d round(s); %s. Machine: %s, %s CPU(s) %s, %s RAM, Linux %s, store on %s (%s). '
                 'Compiler: %s. steppe at %s%s. Load average at start %s, at end %s.\n' % (
                     meta['date'], meta['mode'], meta['rounds'], 'OS caches dropped before every process'
                     if meta['cold_ok'] else '**caches could not be dropped: "cold" is not cold**',
                     m['virtualization'] or 'bare metal?', m['cpus'], m['cpu'], m['memory'], m['kernel'],
                     m['filesystem'], m['device'], m['compiler'], m['git_commit'],
                     ' (+ uncommitted changes)' if m['git_dirty'] else '', ' '.join(m['loadavg_start']),
                     ' '.join(meta.get('loadavg_end', []))))
    if meta.get('nice'):
        lines.append('Benchmark processes ran at nice %d (the machine is shared).\n' % meta['nice'])
    for x in meta.get('skipped', []):
        lines.append('- not run: %s' % x)
    if meta.get('measured_once') and meta['rounds'] > 1:
        lines.append('- measured in the first round only (slower than 1.5× the per-series time budget): ' +
                     '; '.join(meta['measured_once']))
    if failures:
        lines.append('\n## SELF-CHECK FAILURES\n')
        for f in failures:
            lines.append('- **%s**' % f)
    else:
        lines.append('Self-checks: every operation gave identical answers on every system (%d cross-system '
                     'comparisons), every updating run verified after reopening.\n' % checked)
    goals = []
    for b in benches:
        if b.name in summaries:
            report_bench(b, summaries[b.name], gens, lines, goals)
            for sysname, why in b.unsupported.items():
                if sysname in meta['systems']:
                    lines.append('\n**%s on %s**: %s.\n' % (b.name.upper(), LABEL[sysname], why))
    if goals:
        lines.append('\n## Goals\n')
        lines.append('| benchmark | goal | met | measured |')
        lines.append('|---|---|---|---|')
        for g in goals:
            lines.append('| %s %s | %s | %s | %s |' % (g['bench'].upper(), g['size'], g['goal'],
                                                      'yes' if g['ok'] else '**no**', g['detail']))
    if plots:
        lines.append('\n## Plots\n')
        for p in plots:
            lines.append('![%s](%s)' % (os.path.basename(p), os.path.basename(p)))
    lines.append('\n## Systems\n')
    seen = set()
    for b in summaries.values():
        for ops in b.values():
            for systems in ops.values():
                for s, x in systems.items():
                    if s not in seen and x.get('describe'):
                        seen.add(s)
                        lines.append('- **%s**: %s' % (LABEL[s], x['describe']))
    with open(path, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    return goals


# ---- main -----------------------------------------------------------------------------------------

def experiment_header(rep, title, meta):
    """An experiment report's first lines: the title, the run, the machine."""
    m = meta['machine']
    rep.add('# %s\n' % title)
    rep.add('Run %s, `%s` mode, %d round(s), %.0f s; %s. Machine: %s, %s CPU(s) %s, %s RAM, Linux %s, store on %s '
            '(%s). Compiler: %s. steppe at %s%s. Load average at start %s, at end %s.\n' % (
                meta['date'], meta['mode'], meta['rounds'], meta['seconds'],
                'OS caches dropped before every process' if meta['cold_ok'] else
                '**the OS caches could not be dropped: "cold" is not cold**', m['virtualization'] or 'bare metal?',
                m['cpus'], m['cpu'], m['memory'], m['kernel'], m['filesystem'], m['device'], m['compiler'],
                m['git_commit'], ' (+ uncommitted changes)' if m['git_dirty'] else '',
                ' '.join(m['loadavg_start']), ' '.join(meta['loadavg_end'])))
    if meta.get('nice'):
        rep.add('The measuring processes ran at nice %d (the machine is shared).\n' % meta['nice'])


def experiment_binary(args, bench, experiment):
    """An experiment's first step: OUT and the store directory made; the
    path of `bench`'s executable (oo1, oo7), or exit saying how to build it."""
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.store_dir, exist_ok=True)
    exe = os.path.join(args.bin_dir, bench, bench)
    if not os.path.exists(exe):
        sys.exit('%s: %s not built (bench/run --experiment %s builds it)' % (experiment, exe, experiment))
    return exe


def experiment_verdict(rep, failures, passed):
    """An experiment report's self-check section: every failure, or the
    sentence `passed` saying what was checked."""
    if failures:
        rep.add('## SELF-CHECK FAILURES\n', *['- **%s**' % f for f in failures], '')
    else:
        rep.add(passed)


def finish_experiment(out, name, rep, quick, plots, failures, results, checked):
    """An experiment's last steps (experiments.py, hosking95.py): the plots
    into the report, quick mode's empty cells as failures, OUT/<name>.md and
    OUT/results.json written (`results` gains the failures), the verdict
    logged; returns the exit status."""
    if plots:
        rep.add('## Plots\n')
        rep.add(*['![%s](%s)' % (os.path.basename(p), os.path.basename(p)) for p in plots])
        rep.add('')
    if quick and rep.missing:
        failures.append('%d table cells empty: %s' % (len(rep.missing), '; '.join(rep.missing[:10])))
        rep.add('\n**Empty cells**: ' + '; '.join(rep.missing))
    with open(os.path.join(out, name + '.md'), 'w') as f:
        f.write('\n'.join(rep.lines) + '\n')
    with open(os.path.join(out, 'results.json'), 'w') as f:
        json.dump(dict(results, failures=failures), f, indent=1)
    log('\nwrote %s/%s.md, results.json (%.0f s)' % (out, name, results['meta']['seconds']))
    if failures:
        log('\n%d SELF-CHECK FAILURE(S):' % len(failures))
        for f in failures:
            log('  ' + f)
        return 1
    log('all self-checks passed (%d cross-system comparisons, every table filled)' % checked)
    return 0


def load_results(path):
    """A results.json written by a run, gzipped or not."""
    if path.endswith('.gz'):
        import gzip
        with gzip.open(path, 'rt') as f:
            return json.load(f)
    with open(path) as f:
        return json.load(f)


def report_only(args):
    data = load_results(args.report_only)
    benches = [b for b in (OO1, OO7) if any(r['bench'] == b.name for r in data['runs'])]
    failures = list(data['failures'])
    checked = cross_check(data['runs'], [])
    summaries = {b.name: aggregate(data['runs'], b) for b in benches}
    os.makedirs(args.out, exist_ok=True)
    plots = []
    try:
        import oo_plots
        plots = oo_plots.plot_all(summaries, benches, args.out, SHORT, SYSTEMS)
    except ImportError as e:
        log('plots skipped: %s' % e)
    goals = write_report(os.path.join(args.out, 'report.md'), data['meta'], summaries, data['generate'], failures,
                         checked, benches, plots)
    data['summary'], data['goals'] = summaries, goals
    with open(os.path.join(args.out, 'results.json'), 'w') as f:
        json.dump(data, f, indent=1)
    log('rewrote %s/report.md from %s' % (args.out, args.report_only))
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--mode', default='quick', choices=['quick', 'full', 'ci'])
    ap.add_argument('--small-only', action='store_true')
    ap.add_argument('--huge', action='store_true', help='OO1 with 2,000,000 parts too (opt-in)')
    ap.add_argument('--medium', action='store_true', help='OO7 medium too (default in --full)')
    ap.add_argument('--sizes', default='', help='exactly these sizes, e.g. huge or small,medium')
    ap.add_argument('--bench', default='oo1,oo7')
    ap.add_argument('--systems', default=','.join(SYSTEMS))
    ap.add_argument('--ops', default='', help='only these operations (comma separated)')
    ap.add_argument('--rounds', type=int, default=0)
    ap.add_argument('--store-dir', default='/var/tmp/steppe-oo')
    ap.add_argument('--out', required=True)
    ap.add_argument('--bin-dir', default='')
    ap.add_argument('--report-only', default='', metavar='RESULTS_JSON',
                    help='rewrite report.md and the plots from a results.json, running nothing')
    ap.add_argument('--keep-stores', action='store_true')
    ap.add_argument('--nice', type=int, default=0,
                    help='run the benchmark processes at this nice level (e.g. -10 on a shared, busy machine; root)')
    args = ap.parse_args()

    if args.report_only:
        return report_only(args)
    rounds = args.rounds or {'ci': 1, 'quick': 1, 'full': 5}[args.mode]
    systems = [s for s in args.systems.split(',') if s]
    for s in systems:
        if s not in SYSTEMS:
            sys.exit('unknown system %s (%s)' % (s, ', '.join(SYSTEMS)))
    if args.mode == 'ci':
        args.small_only = True
    # budget: a series stops adding warm iterations after this long (libpmemobj's
    # durable T2b needs ~40 s per iteration here); the report shows n.
    cfg = {'ci': ['--hot', '10', '--slope', '16', '--slope-passes', '1', '--budget-s', '5'],
           'quick': ['--hot', '10', '--slope', '32', '--slope-passes', '2', '--budget-s', '20'],
           'full': ['--hot', '10', '--slope', '64', '--slope-passes', '3', '--budget-s', '90']}[args.mode]

    benches = []
    binaries = {}
    for b in (OO1, OO7):
        if b.name not in args.bench.split(','):
            continue
        exe = os.path.join(args.bin_dir, b.name, b.name)
        if not os.path.exists(exe):
            log('%s: %s not built; skipped' % (b.name, exe))
            continue
        binaries[b.name] = exe
        benches.append(b)
    sizes = {}
    for b in benches:
        if b.name == 'oo1':
            sizes[b.name] = ['small'] if args.small_only else ['small', 'large'] + (['huge'] if args.huge else [])
        else:
            sizes[b.name] = ['small'] if args.small_only else ['small'] + (
                ['medium'] if args.medium or args.mode == 'full' else [])

    if args.sizes:
        for b in benches:
            sizes[b.name] = [z for z in args.sizes.split(',') if z in b.sizes]
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.store_dir, exist_ok=True)
    meta = {'date': datetime.datetime.now().strftime('%Y-%m-%d %H:%M'), 'mode': args.mode, 'rounds': rounds,
            'systems': systems, 'machine': machine_info(args.store_dir), 'config': cfg, 'nice': args.nice}
    budget_s = float(cfg[cfg.index('--budget-s') + 1])
    runner = Runner(args, binaries, budget_s)
    # ci: libpmemobj's durable T2b / T2c take tens of seconds per iteration (an msync per undo-log snapshot)
    ci_skip = {('oo7', 'pmem', 't2b'), ('oo7', 'pmem', 't2c')} if args.mode == 'ci' else set()
    families = sorted({FAMILY[s] for s in systems if FAMILY[s]})
    t0 = time.time()
    for b in benches:
        ops = [o for o in b.ops if not args.ops or o in args.ops.split(',')]
        for size in sizes[b.name]:
            runner.generate(b, size, [f for f in families if GEN_SYSTEM[f] not in b.unsupported])
            syss = [s for s in systems if s not in b.unsupported]
            for rnd in range(1, rounds + 1):
                log('[%s %s] round %d/%d' % (b.name, size, rnd, rounds))
                for op in ops:
                    k = (rnd - 1) % len(syss)
                    for s in syss[k:] + syss[:k]:
                        if (b.name, s, op) in ci_skip:
                            if rnd == 1:
                                runner.skipped.append('%s %s %s %s: skipped in --ci mode (tens of seconds per '
                                                      'iteration)' % (b.name, size, op, s))
                            continue
                        runner.measure(b, size, op, s, rnd, cfg)
            if not args.keep_stores:
                shutil.rmtree(os.path.join(args.store_dir, b.name, size), ignore_errors=True)
    meta['seconds'] = time.time() - t0
    meta['loadavg_end'] = open('/proc/loadavg').read().split()[:3]
    meta['cold_ok'] = runner.cold_ok
    checked = cross_check(runner.records, runner.failures)
    summaries = {b.name: aggregate(runner.records, b) for b in benches}

    plots = []
    try:
        import oo_plots
        plots = oo_plots.plot_all(summaries, benches, args.out, SHORT, SYSTEMS)
    except ImportError as e:
        log('plots skipped: %s (install python3-matplotlib; bench/run uses /usr/bin/python3)' % e)

    meta['skipped'] = runner.skipped
    meta['measured_once'] = ['%s %s %s %s (%.0f s)' % (k + (v,)) for k, v in sorted(runner.slow.items())]
    goals = write_report(os.path.join(args.out, 'report.md'), meta, summaries, runner.generated, runner.failures,
                         checked, benches, plots)
    with open(os.path.join(args.out, 'results.json'), 'w') as f:
        json.dump({'meta': meta, 'failures': runner.failures, 'goals': goals, 'summary': summaries,
                   'generate': runner.generated, 'runs': runner.records}, f, indent=1)
    log('\nwrote %s/report.md, results.json%s (%.0f s)' % (args.out, ', %d plots' % len(plots) if plots else '',
                                                            meta['seconds']))
    if runner.failures:
        log('\n%d SELF-CHECK FAILURE(S):' % len(runner.failures))
        for f in runner.failures:
            log('  ' + f)
        return 1
    log('all self-checks passed (%d cross-system comparisons)' % checked)
    return 0


if __name__ == '__main__':
    sys.path.insert(0, HERE)
    sys.exit(main())
