#!/usr/bin/env python3
"""experiments.py — the reference papers' experiments on steppe (issue 17),
run through the OO benchmark harness (oo_bench.py: the same executables,
process runner, cache dropping, cross-system check and machine description).
`bench/run --experiment NAME` builds and starts it.

  hosking-moss   Hosking & Moss 1993 (digest 000 §4-6, §8.2): OO1 lookup and
                 traversal, cold / warm (iterations 1-10, the warm-up curve) /
                 hot (the fitted slope), for the builds steppe has:
                 non-persistent (transient), the "-resident" check-only builds
                 (ID, FB, PF, ID + self-heal: the database built in the
                 measuring process, so every check runs and never fires),
                 ID / FB / PF / ID + self-heal x fetch object / logical /
                 physical segment, and the page engine (uffd, mprotect)
                 beside them; segment faults, objects faulted, references
                 swizzled and PF traps per iteration; the paper's Tables 2-4
                 and the derived ratios of digest 000 §6.4, each beside the
                 paper's figure.
  hosking-1995   Hosking 1995 (digest 001; hosking95.py): the read-barrier
                 table (OO1 traversal cold / warm / hot with instructions and
                 cache misses: hardware counters where the machine has them,
                 else "unavailable"; the TSC; callgrind in --full), and the
                 write-barrier study on the OO1 update traversal: run-time cost
                 per update, checkpoint latency against update probability,
                 the break-even of pages against cards-4096, log volume.

Modes: quick (the smallest size, 1 round, a short hot phase; checks that
every table is filled and every system agrees: what CI runs), full (OO1
small and large, 5 rounds; hosking-1995: OO1 small, 5 rounds). Output:
OUT/<experiment>.md, OUT/results.json, the plots. Exit 1 on any self-check
failure.
"""
import argparse
import datetime
import json
import os
import shutil
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import oo_bench  # noqa: E402
from oo_bench import OO1, Runner, cross_check, drop_caches, log, machine_info  # noqa: E402

# The smallest OO1 database (CI): 2,000 parts, the same generator (the 1 %
# window is 20 ids). Only the experiments use it.
oo_bench.OO1_PARTS.setdefault('tiny', 2000)

# ---- the paper's figures (digest 000 §6, seconds on a DECstation 3100) ---------------------

PAPER = {
    'lookup': {
        'avg': {'non-persistent': 0.565, 'ID-resident': 0.557, 'FB-resident': 0.556, 'PF-resident': 0.567},
        'cold_warm': {'ID-OBJ': (6.75, 1.771), 'ID-LSEG': (7.65, 1.448), 'ID-PSEG': (7.56, 1.431),
                      'FB-OBJ': (379.79, 40.647), 'FB-LSEG': (26.21, 0.558), 'FB-PSEG': (19.81, 0.569),
                      'PF-OBJ': (390.93, 41.579), 'PF-LSEG': (27.21, 0.573), 'PF-PSEG': (20.27, 0.593)},
    },
    'traversal': {
        'avg': {'non-persistent': 0.0880, 'ID-resident': 0.0880, 'FB-resident': 0.0880, 'PF-resident': 0.0886},
        'cold_warm': {'ID-OBJ': (4.01, 0.184), 'ID-LSEG': (5.17, 0.119), 'ID-PSEG': (5.46, 0.110),
                      'FB-OBJ': (19.64, 6.717), 'FB-LSEG': (15.52, 0.0883), 'FB-PSEG': (15.61, 0.0883),
                      'PF-OBJ': (21.30, 8.090), 'PF-LSEG': (16.08, 0.0877), 'PF-PSEG': (15.88, 0.0884)},
    },
    'slope': {'non-persistent': 0.0865, 'ID-resident': 0.0865, 'FB-resident': 0.0865, 'PF-resident': 0.0871,
              'ID-OBJ': 0.1486, 'ID-LSEG': 0.1178, 'ID-PSEG': 0.1086, 'FB-OBJ': 0.0850, 'FB-LSEG': 0.0867,
              'FB-PSEG': 0.0866, 'PF-OBJ': 0.0872, 'PF-LSEG': 0.0862, 'PF-PSEG': 0.0870},
}

FETCH = [('OBJ', 'object'), ('LSEG', 'logical'), ('PSEG', 'physical')]
SCHEMES = [('ID', 'objects-id'), ('FB', 'objects-fb'), ('PF', 'objects-pf'), ('IDSH', 'objects-idsh')]
# As the paper's builds swizzled (digest 000 §3.2-3.6): ID made references to
# resident objects direct at swizzling time; FB and PF re-pointed the slots
# of a fault block at every fault (PF's default).
SWIZZLE = {'ID': ['--swizzle', 'opportunistic'], 'FB': ['--swizzle', 'eager']}


class Row:
    """One build of the paper (or steppe's extra): the system executable and
    its arguments, or why it is not built."""

    def __init__(self, name, system, extra=(), kind='persistent', note='', why=None):
        self.name, self.system, self.extra, self.kind, self.note, self.why = name, system, list(extra), kind, note, why

    @property
    def built(self):
        return self.system is not None


def rows():
    out = [Row('non-persistent', 'transient', kind='resident', note='std::allocator, raw pointers')]
    for s, sysname in SCHEMES:
        out.append(Row('%s-resident' % s, sysname, ['--resident'], 'resident',
                       'built in the measuring process: the check runs, never fires' +
                       (' (extra: not in the paper)' if s == 'IDSH' else '')))
    for s, sysname in SCHEMES:
        for g, fetch in FETCH:
            out.append(Row('%s-%s' % (s, g), sysname, ['--fetch', fetch] + SWIZZLE.get(s, []),
                           note='ID + self-heal (PEVM), extra' if s == 'IDSH' else ''))
    for g, fetch in FETCH:  # the paper's side experiment (digest §3.6, §8.2 item 8)
        out.append(Row('FB-%s (elim. off)' % g, 'objects-fb', ['--fetch', fetch, '--swizzle', 'opportunistic'],
                       note='the slot used is patched, no other: per-fault elimination off'))
    out.append(Row('page engine (uffd)', 'steppe-uffd', kind='page', note='Texas-style swizzling at page-fault time'))
    out.append(Row('page engine (mprotect)', 'steppe-mprotect', kind='page', note='the same, PROT_NONE + SIGSEGV'))
    return out


OPS = ['lookup', 'traversal']
MODES = {
    # sizes, rounds, the measuring processes' series arguments
    'quick': (['tiny'], 1, ['--warm', '9', '--hot', '10', '--slope', '16', '--slope-passes', '1', '--budget-s', '10']),
    # hot OO1 operations take 10-300 µs today: k up to 1,024 repeats, the fastest of 5 passes per k
    'full': (['small', 'large'], 5, ['--warm', '9', '--hot', '10', '--slope', '1024', '--slope-passes', '5',
                                     '--budget-s', '90']),
}


# ---- aggregation ------------------------------------------------------------------------------

def med(v):
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None


def aggregate(records):
    """-> {size: {op: {row: {cold, warm, last, avg, slope, pair, iters[], counters[{...}], n}}}}"""
    acc = {}
    for r in records:
        s = r['series']
        times = s['cold_ms'] + s['warm_ms']
        d = acc.setdefault(r['size_name'], {}).setdefault(r['op'], {}).setdefault(r['system'], {
            'cold': [], 'warm': [], 'last': [], 'avg': [], 'slope': [], 'pair': [], 'open': [], 'iters': [],
            'counters': [], 'scheme': r.get('describe', '')})
        # Medians, not the paper's means: on a shared machine one preempted
        # iteration of 0.1 ms can take 5 ms and would move a mean 5x.
        d['cold'].append(s['cold_ms'][0])
        d['warm'].append(statistics.median(s['warm_ms']) if s['warm_ms'] else None)
        d['last'].append(times[-1])
        d['avg'].append(statistics.median(times))
        d['slope'].append(s.get('hot_slope_ms'))
        d['pair'].append(oo_bench.pair_ratio(s))
        d['open'].append(r.get('open_ms'))
        d['iters'].append(times)
        d['counters'].append(s.get('iteration_counters', []))
    out = {}
    for size, ops in acc.items():
        for op, systems in ops.items():
            for name, d in systems.items():
                n_it = max(len(t) for t in d['iters'])
                iters = [med([t[i] for t in d['iters'] if i < len(t)]) for i in range(n_it)]
                keys = set()
                for cs in d['counters']:
                    for c in cs:
                        keys |= set(c)
                counters = [{k: med([cs[i].get(k) for cs in d['counters'] if i < len(cs)]) for k in keys}
                            for i in range(n_it)]
                out.setdefault(size, {}).setdefault(op, {})[name] = {
                    'cold': med(d['cold']), 'warm': med(d['warm']), 'last': med(d['last']), 'avg': med(d['avg']),
                    'slope': med(d['slope']), 'pair': med(d['pair']), 'open': med(d['open']), 'iters': iters,
                    'counters': counters, 'n': len(d['cold']), 'scheme': d['scheme']}
    return out


# ---- report -------------------------------------------------------------------------------------

def ms(x):
    return oo_bench.fmt_ms(x)


def sec(x):
    if x is None:
        return '–'
    return '%.4g' % x


def ratio(a, b):
    return a / b if a is not None and b else None


def rt(x):
    return oo_bench.fmt_ratio(x)


def cnt(x):
    if x is None:
        return '–'
    return '%.0f' % x if x == int(x) else '%.1f' % x


class Report:
    def __init__(self):
        self.lines, self.missing = [], []

    def add(self, *ls):
        self.lines.extend(ls)

    def table(self, header, body):
        self.add('| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header))
        for b in body:
            self.add('| ' + ' | '.join(b) + ' |')
        self.add('')

    def need(self, what, x):
        """A cell a built row must fill (quick mode fails on a missing one)."""
        if x is None:
            self.missing.append(what)
        return x


def size_tables(rep, size, parts, agg, allrows):
    ops = agg.get(size, {})
    rep.add('## OO1 %s (%s parts)\n' % (size, '{:,}'.format(parts)))

    def get(op, row):
        return ops.get(op, {}).get(row.name)

    def np(op, what):
        x = ops.get(op, {}).get('non-persistent')
        return x[what] if x else None

    # ---- Tables 2 and 3 ----
    for num, op, title in ((2, 'lookup', 'Lookup (1,000 parts through the index)'),
                           (3, 'traversal', 'Traversal (3,280 visits, 7 hops)')):
        paper = PAPER[op]
        rep.add('### Table %d: %s, %s\n' % (num, title, size))
        rep.add('Non-persistent and "-resident" builds: the median of the 10 iterations (ms; the paper: their mean), '
                'median over rounds; ratio = to non-persistent.\n')
        body = []
        for row in allrows:
            if row.kind != 'resident':
                continue
            p = paper['avg'].get(row.name)
            if not row.built:
                body.append([row.name, row.why, '–', sec(p), rt(ratio(p, paper['avg']['non-persistent']))])
                continue
            x = get(op, row)
            a = rep.need('%s %s %s average' % (size, op, row.name), x and x['avg'])
            body.append([row.name, ms(a), rt(ratio(a, np(op, 'avg'))), sec(p),
                         rt(ratio(p, paper['avg']['non-persistent'])) if p else '– (extra)'])
        rep.table(['build', 'steppe median (ms)', 'steppe / non-pers.', 'paper (s)', 'paper / non-pers.'], body)
        rep.add('Persistent builds: cold = iteration 1 in a fresh process after dropping the OS caches (the '
                'operation alone, not the open); warm = median of iterations 2–10; '
                'it. 10 = the last (the paper\'s "warmest"). Ratios: warm / non-persistent (the median of its 10 '
                'iterations), cold / ID-OBJ cold. Medians over rounds.\n')
        body = []
        id_obj = ops.get(op, {}).get('ID-OBJ')
        for row in allrows:
            if row.kind == 'resident':
                continue
            p = paper['cold_warm'].get(row.name)
            pc, pw = p if p else (None, None)
            pr_w = rt(ratio(pw, paper['avg']['non-persistent'])) if p else '–'
            pr_c = rt(ratio(pc, paper['cold_warm']['ID-OBJ'][0])) if p else '–'
            if not row.built:
                body.append([row.name, row.why, '–', '–', '–', '–', sec(pc), sec(pw), pr_w, pr_c])
                continue
            x = get(op, row)
            c = rep.need('%s %s %s cold' % (size, op, row.name), x and x['cold'])
            w = rep.need('%s %s %s warm' % (size, op, row.name), x and x['warm'])
            last = x and x['last']
            body.append([row.name, ms(c), ms(w), ms(last), rt(ratio(w, np(op, 'avg'))),
                         rt(ratio(c, id_obj and id_obj['cold'])), sec(pc), sec(pw), pr_w, pr_c])
        rep.table(['build', 'cold (ms)', 'warm (ms)', 'it. 10 (ms)', 'warm / non-pers.', 'cold / ID-OBJ',
                   'paper cold (s)', 'paper warm (s)', 'paper warm / non-pers.', 'paper cold / ID-OBJ'], body)

    # ---- Table 4 ----
    rep.add('### Table 4: hot traversal, %s: fitted slope b of y = a + b·k over k = 1, 2, 4, … repeats of the '
            'last warm traversal\n' % size)
    rep.add('slope in ms per traversal (median over rounds); / non-pers. = slope ratio between processes (the '
            'paper\'s figure); same-process = the median ratio to a transient copy of the database built in the '
            'same process and timed alternately (robust against machine noise). Lookup slope beside.\n')
    body = []
    for row in allrows:
        p = PAPER['slope'].get(row.name)
        pr = rt(ratio(p, PAPER['slope']['non-persistent'])) if p else '–'
        if not row.built:
            body.append([row.name, row.why, '–', '–', '–', sec(p), pr])
            continue
        x = get('traversal', row)
        lk = get('lookup', row)
        b = rep.need('%s traversal %s slope' % (size, row.name), x and x['slope'])
        body.append([row.name, ms(b), rt(ratio(b, np('traversal', 'slope'))),
                     rt(x and x['pair']) if row.name != 'non-persistent' else '–',
                     ms(lk and lk['slope']), rt(ratio(lk and lk['slope'], np('lookup', 'slope'))),
                     rt(lk and lk['pair']) if row.name != 'non-persistent' else '–', sec(p), pr])
    rep.table(['build', 'slope (ms)', '/ non-pers.', 'same-process ratio', 'lookup slope (ms)', 'lookup / non-pers.',
               'lookup same-process', 'paper slope (s)', 'paper / non-pers.'], body)

    # ---- §6.4 ----
    rep.add('### Derived ratios (digest 000 §6.4), %s: steppe (paper)\n' % size)
    body = []
    for row in allrows:
        if row.kind == 'resident' or not row.name.split('-')[0] in ('ID', 'FB', 'PF', 'IDSH'):
            continue
        pl, pt = PAPER['lookup']['cold_warm'].get(row.name), PAPER['traversal']['cold_warm'].get(row.name)
        ps = PAPER['slope'].get(row.name)
        paper_vals = [ratio(pl and pl[1], PAPER['lookup']['avg']['non-persistent']),
                      ratio(pt and pt[1], PAPER['traversal']['avg']['non-persistent']),
                      ratio(ps, PAPER['slope']['non-persistent']),
                      ratio(pl and pl[0], PAPER['lookup']['cold_warm']['ID-OBJ'][0]),
                      ratio(pt and pt[0], PAPER['traversal']['cold_warm']['ID-OBJ'][0])]
        if row.built:
            lo, tr = get('lookup', row), get('traversal', row)
            lid, tid = ops.get('lookup', {}).get('ID-OBJ'), ops.get('traversal', {}).get('ID-OBJ')
            mine = [ratio(lo and lo['warm'], np('lookup', 'avg')), ratio(tr and tr['warm'], np('traversal', 'avg')),
                    ratio(tr and tr['slope'], np('traversal', 'slope')),
                    ratio(lo and lo['cold'], lid and lid['cold']), ratio(tr and tr['cold'], tid and tid['cold'])]
        else:
            mine = [None] * 5
        body.append([row.name] + ['%s (%s)' % (rt(m) if row.built else 'not built', rt(p) if p else 'extra')
                                  for m, p in zip(mine, paper_vals)])
    rep.table(['build', 'lookup warm / non-pers.', 'traversal warm / non-pers.', 'hot slope / non-pers.',
               'lookup cold / ID-OBJ', 'traversal cold / ID-OBJ'], body)

    # ---- warm-up curves and counters per iteration ----
    for op in OPS:
        built = [r for r in allrows if r.built and get(op, r)]
        n_it = max((len(get(op, r)['iters']) for r in built), default=0)
        rep.add('### Warm-up curve, %s %s: time per iteration (ms; 1 = cold)\n' % (op, size))
        rep.table(['build'] + [str(i + 1) for i in range(n_it)],
                  [[r.name] + [ms(t) for t in get(op, r)['iters']] + ['–'] * (n_it - len(get(op, r)['iters']))
                   for r in built])
        for key, title in (('segment_faults', 'segment faults (page engine: page faults)'),
                           ('objects_faulted', 'objects faulted (copied into the heap)'),
                           ('refs_swizzled', 'references swizzled (page engine: pointers swizzled)')):
            rep.add('**%s %s, per iteration: %s**\n' % (op, size, title))
            body = []
            for r in built:
                cs = get(op, r)['counters']
                alt = {'segment_faults': 'store_faults', 'refs_swizzled': 'pointers_swizzled'}.get(key)
                vals = []
                for c in cs:
                    v = c.get(key)
                    if v is None and alt:
                        v = c.get(alt)
                    vals.append(v)
                if r.name == 'non-persistent':
                    continue
                if r.kind != 'page' or key != 'objects_faulted':
                    for i, v in enumerate(vals):
                        rep.need('%s %s %s %s iteration %d' % (size, op, r.name, key, i + 1), v)
                body.append([r.name] + [cnt(v) for v in vals])
            rep.table(['build'] + [str(i + 1) for i in range(n_it)], body)
        pf = [r for r in built if r.name.startswith('PF-')]
        if pf:
            rep.add('**%s %s, per iteration: PF traps (checks that trapped on a fault block or an indirect '
                    'block)**\n' % (op, size))
            rep.table(['build'] + [str(i + 1) for i in range(n_it)],
                      [[r.name] + [cnt(c.get('traps')) for c in get(op, r)['counters']] for r in pf])


def self_checks(agg, allrows, failures):
    """What must hold whatever the timings: the -resident builds never fault,
    every persistent object-engine build faults in its cold iteration."""
    for size, ops in agg.items():
        for op, systems in ops.items():
            for row in allrows:
                x = systems.get(row.name)
                if not x or not row.built or not x['counters']:
                    continue
                faults = [c.get('segment_faults') for c in x['counters']]
                if row.kind == 'resident' and row.name != 'non-persistent' and any(faults):
                    failures.append('%s %s %s: a -resident build faulted (%s)' % (size, op, row.name, faults))
                if row.kind == 'persistent' and not faults[0]:
                    failures.append('%s %s %s: no segment fault in the cold iteration' % (size, op, row.name))


def line_color(row):
    """A colour per detection scheme (the page engine, non-persistent apart)."""
    if row.kind == 'page':
        return '#8c564b'
    return {'non': 'black', 'ID': '#1f77b4', 'FB': '#d62728', 'PF': '#9467bd', 'IDSH': '#2ca02c'}[
        row.name.split('-')[0]]


def line_style(row):
    """A line style per fetch granularity (dotted: -resident and non-persistent)."""
    if row.kind == 'page':
        return '-' if 'uffd' in row.name else '--'
    if row.kind == 'resident':
        return ':'
    return {'OBJ': '--', 'LSEG': '-', 'PSEG': '-.'}[row.name.split('-')[1].split()[0]]


def plot(agg, allrows, out):
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError as e:
        log('plots skipped: %s' % e)
        return []
    files = []
    for size, ops in agg.items():
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
        for ax, op in zip(axes, OPS):
            for row in allrows:
                x = ops.get(op, {}).get(row.name)
                if not x:
                    continue
                ax.plot(range(1, len(x['iters']) + 1), x['iters'], line_style(row), color=line_color(row),
                        marker='o', ms=3, lw=1.2, label=row.name)
            ax.set_yscale('log')
            ax.set_xlabel('iteration (1 = cold)')
            ax.set_ylabel('ms')
            ax.set_title('OO1 %s %s: warm-up' % (size, op))
            ax.grid(alpha=.3)
        axes[1].legend(fontsize=7, ncol=2)
        fig.tight_layout()
        f = os.path.join(out, 'hosking-moss-%s-warmup.png' % size)
        fig.savefig(f, dpi=110)
        plt.close(fig)
        files.append(f)
    return files


def hosking_moss(args):
    if args.report_only:
        data = oo_bench.load_results(args.report_only)
        return hosking_moss_report(args, data['meta'], data['runs'], list(data['failures']), data['generate'],
                                   data['meta']['sizes'])
    sizes, rounds, cfg = MODES[args.mode]
    if args.sizes:
        sizes = args.sizes.split(',')
    rounds = args.rounds or rounds
    allrows = rows()
    built = [r for r in allrows if r.built]
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.store_dir, exist_ok=True)
    exe = os.path.join(args.bin_dir, 'oo1', 'oo1')
    if not os.path.exists(exe):
        sys.exit('experiments: %s not built (bench/run --experiment hosking-moss builds it)' % exe)
    runner = Runner(args, {'oo1': exe}, float(cfg[cfg.index('--budget-s') + 1]))
    meta = {'date': datetime.datetime.now().strftime('%Y-%m-%d %H:%M'), 'experiment': 'hosking-moss',
            'mode': args.mode, 'rounds': rounds, 'sizes': sizes, 'config': cfg,
            'machine': machine_info(args.store_dir), 'nice': args.nice,
            'segment_objects': args.segment_objects or None, 'index_chunk_slots': args.index_chunk_slots or None}
    t0 = time.time()
    families = sorted({oo_bench.FAMILY[r.system] for r in built if oo_bench.FAMILY[r.system]})
    for size in sizes:
        objects_gen = []  # how the object-engine databases are built (generate, and --resident in measure)
        if args.segment_objects:
            objects_gen += ['--segment-objects', str(args.segment_objects)]
        if args.index_chunk_slots:
            objects_gen += ['--index-chunk-slots', str(args.index_chunk_slots)]
        runner.generate(OO1, size, families, {f: objects_gen for f in families if f in oo_bench.OBJECT_SYSTEMS})
        for rnd in range(1, rounds + 1):
            log('[hosking-moss oo1 %s] round %d/%d' % (size, rnd, rounds))
            for op in OPS:
                k = (rnd - 1) % len(built)
                for row in built[k:] + built[:k]:  # the order rotates each round
                    path = None
                    if row.kind == 'resident' and row.system != 'transient':
                        path = os.path.join(args.store_dir, 'oo1', size, 'resident-%s.db' % row.system)
                    extra = row.extra + (objects_gen if path else [])
                    runner.measure(OO1, size, op, row.system, rnd, cfg, variant=row.name, extra=extra, path=path)
        if not args.keep_stores:
            shutil.rmtree(os.path.join(args.store_dir, 'oo1', size), ignore_errors=True)
    meta['seconds'] = time.time() - t0
    meta['loadavg_end'] = open('/proc/loadavg').read().split()[:3]
    meta['cold_ok'] = runner.cold_ok
    return hosking_moss_report(args, meta, runner.records, runner.failures, runner.generated, sizes)


def hosking_moss_report(args, meta, records, failures, generated, sizes):
    """Checks the answers, writes hosking-moss.md, results.json and the plots."""
    allrows = rows()
    os.makedirs(args.out, exist_ok=True)
    checked = cross_check(records, failures)
    failures[:] = list(dict.fromkeys(failures))  # a rewritten report checks again what the run found
    agg = aggregate(records)
    self_checks(agg, allrows, failures)

    rep = Report()
    oo_bench.experiment_header(rep, 'Hosking & Moss 1993 on steppe: OO1 lookup and traversal', meta)
    if meta.get('segment_objects'):
        rep.add('**The object-engine stores were made with %d objects per segment** (`--segment-objects`; the '
                'engine\'s default is 255), so a logical segment holds fewer objects and a physical segment '
                '(32 KiB) several logical ones.\n' % meta['segment_objects'])
    if meta.get('index_chunk_slots'):
        rep.add('**The object-engine OO1 index had %d slots per array object** (`--index-chunk-slots`; default '
                '256 = 4 KiB chunks under a directory).\n' % meta['index_chunk_slots'])
    if failures:
        rep.add('## SELF-CHECK FAILURES\n')
        rep.add(*['- **%s**' % f for f in failures])
        rep.add('')
    else:
        rep.add('Self-checks: every build gave the same answers (lookup hits and checksums, traversal visits and '
                'checksums, every iteration; %d cross-system comparisons); the -resident builds never faulted; '
                'every persistent object-engine build faulted in its cold iteration.\n' % checked)
    rep.add('PF: fault blocks at PROT_NONE addresses, the check one load that traps; the SIGSEGV handler has the '
            'store\'s service thread fault the object in and patches the register and the slot (docs/objects.md).\n')
    rep.add('Builds: ' + '; '.join('**%s**: %s' % (r.name, r.note or r.why or r.system) for r in allrows
                                   if r.note) + '.\n')
    for size in sizes:
        size_tables(rep, size, oo_bench.OO1_PARTS[size], agg, allrows)
    plots = plot(agg, allrows, args.out)
    return oo_bench.finish_experiment(args.out, 'hosking-moss', rep, meta['mode'] == 'quick', plots, failures,
                                      {'meta': meta, 'summary': agg, 'generate': generated, 'runs': records},
                                      checked)


def hosking_1995(args):
    import hosking95
    if args.callgrind == 'auto':
        args.callgrind = args.mode == 'full' and shutil.which('valgrind') is not None
    else:
        args.callgrind = args.callgrind == 'yes'
    return hosking95.run(args, None)


def moss(args):
    import moss as moss1990
    return moss1990.run(args)


EXPERIMENTS = {'hosking-moss': hosking_moss, 'hosking-1995': hosking_1995, 'moss': moss,
               'texas': lambda args: __import__('texas').run(args, None),
               'pevm': lambda args: __import__('pevm').run(args)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--experiment', required=True, choices=sorted(EXPERIMENTS))
    ap.add_argument('--mode', default='quick', choices=sorted(MODES))
    ap.add_argument('--sizes', default='', help='OO1 sizes: tiny (2,000 parts), small, large, huge')
    ap.add_argument('--rounds', type=int, default=0)
    ap.add_argument('--index-chunk-slots', type=int, default=0,
                    help='slots per array object of the object-engine OO1 index (a power of two; default 256; '
                         '>= 2 x parts: one flat array, as the pointer model\'s)')
    ap.add_argument('--segment-objects', type=int, default=0,
                    help='objects per segment in the object-engine stores (1..255; default: the engine\'s, 255)')
    ap.add_argument('--store-dir', default='/var/tmp/steppe-experiments')
    ap.add_argument('--out', required=True)
    ap.add_argument('--bin-dir', default='')
    ap.add_argument('--keep-stores', action='store_true')
    ap.add_argument('--nice', type=int, default=0)
    ap.add_argument('--callgrind', default='auto', choices=['auto', 'yes', 'no'],
                    help='hosking-1995: also count instructions and simulated cache misses under valgrind\'s '
                         'callgrind (auto: in --full mode when valgrind is installed)')
    ap.add_argument('--report-only', default='', metavar='RESULTS_JSON',
                    help='rewrite the report and plots from a results.json, running nothing')
    args = ap.parse_args()
    return EXPERIMENTS[args.experiment](args)


if __name__ == '__main__':
    sys.exit(main())
