"""pevm.py — Lewis, Mathiske & Gafter 2000, "Architecture of the PEVM" (seed 004,
digest 004 §3, §5.2): issue 17 item 4, the experiment `pevm` of
experiments.py (`bench/run --experiment pevm --quick|--full`).

  Tables 2-5  OO7 T1, T2a, T2b, T2c, T6, Q1, Q4, small and medium, each
              operation run 5 times in one process with a commit after each
              run inside the timed region (the paper's protocol, digest §3.1:
              cold = run 1 in a fresh process after dropping the OS caches,
              warm = the mean of runs 2-5), transient (Tables 2, 3) and
              persistent (Tables 4, 5). The rows:
                transient      the same OO7 over std::allocator and raw
                               pointers, no barrier: the paper's ResVM
                IDSH-resident  the object engine under id_self_heal, the
                               database built in the measuring process and
                               never committed after: every check and
                               barrier runs, none fires, nothing is written:
                               the PEVM's transient runs
                IDSH           id_self_heal + cards, copy, logical segments,
                               persistence by reachability: the PEVM's
                               configuration (lazy direct swizzling, slots
                               self-healed at first use)
                FB             fault_block + cards, for comparison
  Derived     (digest §3.4) the barrier overhead (IDSH-resident / transient;
              the paper's +12-16 % medium, +23-28 % small), the persistence
              overhead (IDSH / transient), the checkpoint cost per dirty
              atomic part ((T2b - T1) / parts written), the cold / warm
              ratio, the fixed cost of an almost empty commit.
  Eviction    (digest §1.13, §5.2) T2a repeated (a full traversal updating
              each composite part's root part, a commit after each) under
              options::eviction none / total / random / second_chance, at a
              resident budget that holds the working set and at ones that
              hold about half and a quarter of it: time, objects evicted and
              faulted, persistent bytes in memory before and after the
              commits (the safe points), peak RSS. fault_block only:
              id_self_heal cannot evict (its self-healed slots hold
              addresses nothing can re-point; the engine refuses total and
              random under it).

Modes: quick (OO7 small, 1 round; every table filled, every row's answers
equal: what CI runs), full (small and medium, 5 rounds).
"""
import copy
import datetime
import math
import os
import shutil
import statistics
import time

import oo_bench
from hosking95 import Report, ratio
from oo_bench import OO7, Runner, cross_check, log, machine_info

# ---- the paper's figures (digest 004 §3.3: PEVM in ms, ResVM as a ratio to it) --------------

OPS = ['t1', 't2a', 't2b', 't2c', 't6', 'q1', 'q4']
TRAVERSALS = ['t1', 't2a', 't2b', 't2c', 't6']  # the paper's "mean" row: geometric mean of these
LABEL = {'t1': 'T1', 't2a': 'T2a', 't2b': 'T2b', 't2c': 'T2c', 't6': 'T6', 'q1': 'Q1', 'q4': 'Q4'}
# (PEVM transient ms, ResVM / PEVM) warm (Table 2) and cold (Table 3); PEVM persistent ms warm (Table 4), cold (Table 5)
PAPER = {
    'small': {
        'transient_warm': {'q1': (1, 1.00), 'q4': (1, 1.00), 't1': (372, 0.80), 't2a': (373, 0.78),
                           't2b': (378, 0.78), 't2c': (388, 0.81), 't6': (73, 0.40)},
        'transient_cold': {'q1': (4, 0.75), 'q4': (5, 1.00), 't1': (557, 0.58), 't2a': (375, 0.79),
                           't2b': (374, 0.79), 't2c': (390, 0.77), 't6': (75, 0.48)},
        'persistent_warm': {'q1': 18, 'q4': 19, 't1': 411, 't2a': 428, 't2b': 606, 't2c': 618, 't6': 109},
        'persistent_cold': {'q1': 62, 'q4': 49, 't1': 6473, 't2a': 6486, 't2b': 6692, 't2c': 6735, 't6': 616},
    },
    'medium': {
        'transient_warm': {'q1': (1, 1.00), 'q4': (1, 1.00), 't1': (3389, 0.86), 't2a': (3288, 0.88),
                           't2b': (3289, 0.89), 't2c': (3441, 0.89), 't6': (75, 0.40)},
        'transient_cold': {'q1': (5, 0.80), 'q4': (6, 0.67), 't1': (3324, 0.90), 't2a': (3355, 0.88),
                           't2b': (3288, 0.90), 't2c': (3448, 0.88), 't6': (79, 0.57)},
        'persistent_warm': {'q1': 18, 'q4': 17, 't1': 3600, 't2a': 3652, 't2b': 6523, 't2c': 6633, 't6': 105},
        'persistent_cold': {'q1': 89, 'q4': 50, 't1': 66831, 't2a': 66962, 't2b': 69405, 't2c': 69652, 't6': 658},
    },
}
ATOMIC_PARTS = {'small': 10000, 'medium': 100000}  # OO7: 500 composite parts x 20 / 200 atomic parts
WRITES_PER_PART = {'t2b': 1, 't2c': 4}  # swaps per atomic part; each part is written once per commit

# ---- rows ---------------------------------------------------------------------------------------


class Row:
    def __init__(self, name, system, extra=(), kind='persistent', note=''):
        self.name, self.system, self.extra, self.kind, self.note = name, system, list(extra), kind, note


ROWS = [
    Row('transient', 'transient', kind='transient',
        note='std::allocator and raw pointers, no barrier: the paper\'s ResVM'),
    Row('IDSH-resident', 'objects-idsh', ['--resident'], kind='resident',
        note='id_self_heal, the database built in the process, not committed after: every check and barrier '
             'runs, none fires (the PEVM\'s transient runs)'),
    Row('IDSH', 'objects-idsh', note='id_self_heal + cards, copy, logical segments, reachability commit: the '
                                     'PEVM\'s configuration'),
    Row('FB', 'objects-fb', note='fault_block + cards, copy, logical segments: for comparison'),
]
POLICIES = ['none', 'total', 'random', 'second_chance']
# budgets as fractions of the working set (the persistent bytes one T2a brings into memory)
BUDGETS = [('holds', 1.25), ('half', 0.5), ('quarter', 0.25)]
EVICT_OP = 't2a'

MODES = {
    # sizes, rounds, eviction-study iterations
    'quick': (['small'], 1, 6),
    'full': (['small', 'medium'], 5, 10),
}
# every measuring process: 1 cold + 4 warm runs, a commit after each, no hot phase
SERIES = ['--warm', '4', '--hot', '0', '--slope-passes', '0', '--no-pair', '--commit-each', '--budget-s', '0']

# Resident rows build their own store and commit nothing after building: no
# pristine copy, no reopening to verify (what they updated was never committed).
OO7_BUILT_IN_PROCESS = copy.copy(OO7)
OO7_BUILT_IN_PROCESS.update_ops = set()


# ---- running ---------------------------------------------------------------------------------------

def run(args):
    if args.report_only:
        data = oo_bench.load_results(args.report_only)
        return report(args, data['meta'], data['runs'], list(data['failures']), data['generate'])
    sizes, rounds, evict_iters = MODES[args.mode]
    if args.sizes:
        sizes = args.sizes.split(',')
    rounds = args.rounds or rounds
    exe = oo_bench.experiment_binary(args, 'oo7', 'pevm')
    runner = Runner(args, {'oo7': exe}, float('inf'))  # no row is skipped in later rounds as slow
    meta = {'date': datetime.datetime.now().strftime('%Y-%m-%d %H:%M'), 'experiment': 'pevm', 'mode': args.mode,
            'rounds': rounds, 'sizes': sizes, 'series': SERIES, 'evict_iterations': evict_iters,
            'machine': machine_info(args.store_dir), 'nice': args.nice}
    t0 = time.time()
    families = sorted({oo_bench.FAMILY[r.system] for r in ROWS if oo_bench.FAMILY[r.system]})
    for size in sizes:
        runner.generate(OO7, size, families)
        for rnd in range(1, rounds + 1):
            log('[pevm oo7 %s] round %d/%d: Tables 2-5' % (size, rnd, rounds))
            k = (rnd - 1) % len(ROWS)
            for op in OPS:
                for row in ROWS[k:] + ROWS[:k]:  # the order rotates each round
                    measure_row(runner, size, op, row, rnd)
        log('[pevm oo7 %s] eviction policies' % size)
        eviction_study(runner, size, evict_iters)
        if not args.keep_stores:
            shutil.rmtree(os.path.join(args.store_dir, 'oo7', size), ignore_errors=True)
    meta['seconds'] = time.time() - t0
    meta['loadavg_end'] = open('/proc/loadavg').read().split()[:3]
    meta['cold_ok'] = runner.cold_ok
    return report(args, meta, runner.records, runner.failures, runner.generated)


def measure_row(runner, size, op, row, rnd, extra=(), variant=None, series=SERIES):
    fam = oo_bench.FAMILY[row.system]
    if row.kind == 'resident':
        path = runner.store_path(OO7, size, 'resident-' + row.system)
        runner.measure(OO7_BUILT_IN_PROCESS, size, op, row.system, rnd, series, variant=variant or row.name,
                       extra=row.extra + list(extra), path=path)
    elif fam and op not in OO7.update_ops:
        # read-only operations commit too (--commit-each): on a copy, so the pristine store stays pristine
        runner.measure(OO7, size, op, row.system, rnd, series, variant=variant or row.name,
                       extra=row.extra + list(extra), path=runner.copy_store(OO7, size, fam))
    else:
        runner.measure(OO7, size, op, row.system, rnd, series, variant=variant or row.name,
                       extra=row.extra + list(extra))


def eviction_study(runner, size, iterations):
    """T2a repeated under each policy: first without eviction at an unlimited
    budget (the working set: the most persistent bytes in memory before a
    commit), then every policy at each budget."""
    fb = next(r for r in ROWS if r.system == 'objects-fb')
    series = ['--warm', str(iterations - 1)] + SERIES[2:]
    probe = 'FB evict none @ unlimited'
    measure_row(runner, size, EVICT_OP, fb, 1, ['--eviction', 'none', '--budget-kib', str(1 << 30)], probe, series)
    rec = next((r for r in runner.records if r['system'] == probe and r['size_name'] == size), None)
    if not rec or not rec.get('resident_before_commit'):
        runner.failures.append('%s eviction: the probe run reported no resident bytes' % size)
        return
    working_set = max(rec['resident_before_commit'])
    for bname, frac in BUDGETS:
        kib = max(1, int(working_set * frac) >> 10)
        for policy in POLICIES:
            measure_row(runner, size, EVICT_OP, fb, 1, ['--eviction', policy, '--budget-kib', str(kib)],
                        evict_variant(policy, bname), series)


def evict_variant(policy, budget):
    return 'FB evict %s @ %s' % (policy, budget)


# ---- aggregation ------------------------------------------------------------------------------------

def med(v):
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None


def mean(v):
    return sum(v) / len(v) if v else None


def geomean(v):
    if not v or any(x is None or x <= 0 for x in v):
        return None
    return math.exp(sum(math.log(x) for x in v) / len(v))


def aggregate(records):
    """-> {size: {op: {row: {cold, warm, commit_cold, commit_warm, counters..., n}}}}: per
    process cold = run 1, warm = the mean of runs 2-5 (the paper's), then the
    median over rounds."""
    acc = {}
    for r in records:
        s = r['series']
        d = acc.setdefault(r['size_name'], {}).setdefault(r['op'], {}).setdefault(r['system'], {
            'cold': [], 'warm': [], 'commit_cold': [], 'commit_warm': [], 'faulted': [], 'evicted': [],
            'before': [], 'after': [], 'rss': [], 'written': []})
        d['cold'].append(s['cold_ms'][0])
        d['warm'].append(mean(s['warm_ms']))
        c = r.get('commit_ms') or []
        d['commit_cold'].append(c[0] if c else None)
        d['commit_warm'].append(mean(c[1:]) if len(c) > 1 else None)
        its = s.get('iteration_counters', [])
        d['faulted'].append([i.get('objects_faulted') for i in its])
        d['evicted'].append([i.get('evicted_objects') for i in its])
        d['written'].append([i.get('objects_written') for i in its])
        before, after = r.get('resident_before_commit'), r.get('resident_after_commit')  # objects-* only
        d['before'].append(max(before) if before else None)
        d['after'].append(max(after[1:] or after) if after else None)
        d['rss'].append(s.get('peak_rss_kib'))
    out = {}
    for size, ops in acc.items():
        for op, systems in ops.items():
            for name, d in systems.items():
                x = {k: med(d[k]) for k in ('cold', 'warm', 'commit_cold', 'commit_warm', 'before', 'after', 'rss')}
                for k in ('faulted', 'evicted', 'written'):  # per iteration, the first round's process
                    x[k] = d[k][0]
                x['n'] = len(d['cold'])
                out.setdefault(size, {}).setdefault(op, {})[name] = x
    return out


# ---- report -------------------------------------------------------------------------------------------

def ms(x):
    return oo_bench.fmt_ms(x)


def rt(x):
    return oo_bench.fmt_ratio(x)


def pct(x):
    return '–' if x is None else '%+.0f %%' % ((x - 1) * 100)


def us(x):
    return '–' if x is None else '%.2f µs' % x


def mib(b):
    return '–' if b is None else '%.1f MiB' % (b / 2**20)


def cnt(x):
    return '–' if x is None else '{:,}'.format(int(x))


def get(agg, size, op, row, key):
    x = agg.get(size, {}).get(op, {}).get(row)
    return x and x.get(key)


def paper_transient(size, phase, op):
    """(PEVM transient ms, ResVM ms) of Tables 2 / 3."""
    pevm, res = PAPER[size]['transient_' + phase][op]
    return pevm, pevm * res


def transient_tables(rep, size, agg):
    for num, phase in ((2, 'warm'), (3, 'cold')):
        rep.add('### Table %d: transient, %s, %s (ms)\n' % (num, phase, size))
        rep.add('steppe: transient = OO7 over raw pointers (the paper\'s ResVM); IDSH-resident = the object '
                'engine\'s id_self_heal checks and barriers over a database built in the process (the PEVM\'s '
                'transient runs). Ratio = transient / IDSH-resident, as the paper gives ResVM / PEVM.\n')
        body = []
        for op in OPS + ['mean']:
            if op == 'mean':
                t = geomean([get(agg, size, o, 'transient', phase) for o in TRAVERSALS])
                r = geomean([get(agg, size, o, 'IDSH-resident', phase) for o in TRAVERSALS])
                pp = geomean([paper_transient(size, phase, o)[0] for o in TRAVERSALS])
                pr = geomean([paper_transient(size, phase, o)[1] for o in TRAVERSALS])
                name = 'mean T1–T6 (geometric)'
            else:
                t = rep.need('%s %s %s transient' % (size, phase, op), get(agg, size, op, 'transient', phase))
                r = rep.need('%s %s %s IDSH-resident' % (size, phase, op), get(agg, size, op, 'IDSH-resident', phase))
                pp, pr = paper_transient(size, phase, op)
                name = LABEL[op]
            body.append([name, ms(t), ms(r), rt(ratio(t, r)), '%.0f' % pp, rt(ratio(pr, pp))])
        rep.table(['op', 'transient', 'IDSH-resident', 'transient / IDSH-res.', 'paper PEVM (ms)',
                   'paper ResVM / PEVM'], body)


def persistent_tables(rep, size, agg):
    for num, phase in ((4, 'warm'), (5, 'cold')):
        rep.add('### Table %d: persistent, %s, %s (ms)\n' % (num, phase, size))
        rep.add('A commit after each run, inside the time. IDSH = the PEVM\'s scheme; FB beside it (ratio FB / '
                'IDSH); / transient = IDSH over the raw-pointer program (the paper: PEVM persistent over ResVM '
                '%s).\n' % phase)
        body = []
        for op in OPS + ['mean']:
            if op == 'mean':
                ids = geomean([get(agg, size, o, 'IDSH', phase) for o in TRAVERSALS])
                fb = geomean([get(agg, size, o, 'FB', phase) for o in TRAVERSALS])
                t = geomean([get(agg, size, o, 'transient', phase) for o in TRAVERSALS])
                pp = geomean([PAPER[size]['persistent_' + phase][o] for o in TRAVERSALS])
                pres = geomean([paper_transient(size, phase, o)[1] for o in TRAVERSALS])
                name = 'mean T1–T6 (geometric)'
            else:
                ids = rep.need('%s %s %s IDSH' % (size, phase, op), get(agg, size, op, 'IDSH', phase))
                fb = rep.need('%s %s %s FB' % (size, phase, op), get(agg, size, op, 'FB', phase))
                t = get(agg, size, op, 'transient', phase)
                pp = PAPER[size]['persistent_' + phase][op]
                pres = paper_transient(size, phase, op)[1]
                name = LABEL[op]
            body.append([name, ms(ids), ms(fb), rt(ratio(fb, ids)), rt(ratio(ids, t)), '%.0f' % pp,
                         rt(ratio(pp, pres))])
        rep.table(['op', 'IDSH', 'FB', 'FB / IDSH', 'IDSH / transient', 'paper PEVM (ms)',
                   'paper PEVM / ResVM'], body)


def derived(rep, size, agg):
    rep.add('### Derived views (digest 004 §3.4), %s\n' % size)
    # barrier overhead: the checks and barriers alone
    rep.add('**Barrier overhead** (IDSH-resident / transient − 1: the checks and barriers, nothing faulted or '
            'written; the paper: PEVM transient / ResVM − 1):\n')
    body = []
    for phase in ('warm', 'cold'):
        mine = [ratio(get(agg, size, o, 'IDSH-resident', phase), get(agg, size, o, 'transient', phase))
                for o in TRAVERSALS]
        paper = [1 / PAPER[size]['transient_' + phase][o][1] for o in TRAVERSALS]
        gm = ratio(geomean([get(agg, size, o, 'IDSH-resident', phase) for o in TRAVERSALS]),
                   geomean([get(agg, size, o, 'transient', phase) for o in TRAVERSALS]))
        pgm = ratio(geomean([paper_transient(size, phase, o)[0] for o in TRAVERSALS]),
                    geomean([paper_transient(size, phase, o)[1] for o in TRAVERSALS]))
        for i, m in enumerate(mine):
            rep.need('%s barrier overhead %s %s' % (size, phase, TRAVERSALS[i]), m)
        body.append([phase] + ['%s (%s)' % (pct(m), pct(p)) for m, p in zip(mine, paper)] +
                    ['%s (%s)' % (rt(gm), rt(pgm))])
    rep.table(['phase'] + [LABEL[o] for o in TRAVERSALS] + ['geomean T1–T6, ratio'], body)
    # persistence overhead
    rep.add('**Persistence overhead** (IDSH persistent / transient − 1, a commit after every run; the paper: '
            'PEVM persistent / ResVM − 1):\n')
    body = []
    for phase in ('warm', 'cold'):
        mine = [ratio(get(agg, size, o, 'IDSH', phase), get(agg, size, o, 'transient', phase)) for o in TRAVERSALS]
        paper = [ratio(PAPER[size]['persistent_' + phase][o], paper_transient(size, phase, o)[1]) for o in TRAVERSALS]
        fbm = [ratio(get(agg, size, o, 'FB', phase), get(agg, size, o, 'transient', phase)) for o in TRAVERSALS]
        body.append(['IDSH ' + phase] + ['%s (%s)' % (pct(m), pct(p)) for m, p in zip(mine, paper)] +
                    [rt(geomean(mine)) + ' (%s)' % rt(geomean(paper))])
        body.append(['FB ' + phase] + [pct(m) for m in fbm] + [rt(geomean(fbm))])
    rep.table(['row'] + [LABEL[o] for o in TRAVERSALS] + ['geomean T1–T6, ratio'], body)
    # checkpoint cost per dirty object
    parts = ATOMIC_PARTS[size]
    rep.add('**Checkpoint cost per dirty atomic part**, warm: (T2b − T1) / %s atomic parts written by each '
            'commit (and T2c: each part swapped 4 times, written once); the commit alone: its own time / parts '
            'written. The paper: (T2b − T1) / parts ≈ %s.\n' % ('{:,}'.format(parts),
                                                                 us(1000 * (PAPER[size]['persistent_warm']['t2b'] -
                                                                            PAPER[size]['persistent_warm']['t1']) / parts)))
    body = []
    for row in ('IDSH', 'FB'):
        t1 = get(agg, size, 't1', row, 'warm')
        cells = [row]
        for op in ('t2b', 't2c'):
            t = get(agg, size, op, row, 'warm')
            cells.append(us(rep.need('%s ckpt %s %s' % (size, op, row), t is not None and t1 is not None and
                                     1000 * (t - t1) / parts or None)))
            c = get(agg, size, op, row, 'commit_warm')
            cells.append(us(c and 1000 * c / parts))
        written = get(agg, size, 't2b', row, 'written')
        cells.append(cnt(written[-1] if written else None))
        body.append(cells)
    rep.table(['row', '(T2b − T1) / part', 'T2b commit / part', '(T2c − T1) / part', 'T2c commit / part',
               'objects written by a T2b commit'], body)
    # cold / warm
    rep.add('**Cold / warm** (persistent: the whole database faulted in by the first run; the paper: 15–19× on '
            'T1 and T2a):\n')
    body = []
    for row in ('IDSH', 'FB', 'transient'):
        body.append([row] + [rt(ratio(get(agg, size, o, row, 'cold'), get(agg, size, o, row, 'warm')))
                             for o in OPS])
    body.append(['paper PEVM persistent'] + [rt(ratio(PAPER[size]['persistent_cold'][o],
                                                      PAPER[size]['persistent_warm'][o])) for o in OPS])
    rep.table(['row'] + [LABEL[o] for o in OPS], body)
    # almost empty commit
    rep.add('**Fixed cost of an almost empty commit**: the commit after a read-only run, timed alone (warm '
            'mean), and Q1 / Q4 persistent − transient (the paper\'s estimate from Q1 and Q4: 16–25 ms, against '
            '~1 ms transient):\n')
    body = []
    for row in ('IDSH', 'FB'):
        cells = [row]
        for op in ('t1', 't6', 'q1', 'q4'):
            cells.append(ms(rep.need('%s empty commit %s %s' % (size, op, row), get(agg, size, op, row,
                                                                                   'commit_warm'))))
        for op in ('q1', 'q4'):
            p, t = get(agg, size, op, row, 'warm'), get(agg, size, op, 'transient', 'warm')
            cells.append(ms(p - t if p is not None and t is not None else None))
        body.append(cells)
    pw = PAPER[size]['persistent_warm']
    body.append(['paper PEVM', '–', '–', '–', '–', '%.0f' % (pw['q1'] - PAPER[size]['transient_warm']['q1'][0]),
                 '%.0f' % (pw['q4'] - PAPER[size]['transient_warm']['q4'][0])])
    rep.table(['row', 'commit after T1', 'after T6', 'after Q1', 'after Q4', 'Q1 pers. − trans.',
               'Q4 pers. − trans.'], body)


def eviction_table(rep, size, agg, iterations):
    ops = agg.get(size, {}).get(EVICT_OP, {})
    probe = ops.get('FB evict none @ unlimited')
    ws = probe and probe['before']
    rep.add('### Eviction policies, %s: T2a × %d, a commit after each, fault_block\n' % (size, iterations))
    rep.add('Working set = the persistent bytes in memory before a commit without eviction: %s. Budgets: holds '
            '= 1.25 × that, half = 0.5 ×, quarter = 0.25 ×. The engine evicts at safe points only (the end of '
            'commit and rollback), so memory grows through a traversal and the policy acts at its commit: '
            '"before" is the most memory held just before a commit, "after" the most the policy kept after one '
            '(runs 2–%d). id_self_heal is not in this table: nothing can leave under it (its self-healed slots '
            'hold addresses nothing can re-point), and it refuses total and random. warm = mean of runs '
            '2–%d.\n' % (mib(ws), iterations, iterations))
    body = []
    for bname, frac in BUDGETS:
        for policy in POLICIES:
            x = ops.get(evict_variant(policy, bname))
            name = '%s @ %s' % (policy, bname)
            warm = rep.need('%s eviction %s warm' % (size, name), x and x['warm'])
            ev = x and sum(v or 0 for v in x['evicted'])
            fa = x and sum(v or 0 for v in x['faulted'][1:])
            body.append([bname, policy, ms(x and x['cold']), ms(warm), rt(ratio(warm, probe and probe['warm'])),
                         cnt(ev), cnt(fa), mib(x and x['before']), mib(x and x['after']),
                         mib(x['rss'] * 1024 if x and x['rss'] else None)])
    rep.table(['budget', 'policy', 'cold (ms)', 'warm (ms)', 'warm / no eviction', 'objects evicted',
               'objects faulted (runs 2+)', 'before a commit', 'after a commit', 'peak RSS'], body)


def self_checks(agg, failures):
    for size, ops in agg.items():
        for op, systems in ops.items():
            for name, x in systems.items():
                faulted = x['faulted'] or []
                if name == 'IDSH-resident' and any(faulted):
                    failures.append('%s %s %s: a resident build faulted (%s)' % (size, op, name, faulted))
                if name in ('IDSH', 'FB') and not (faulted and faulted[0]):
                    failures.append('%s %s %s: no object faulted in the cold run' % (size, op, name))
                if name.startswith('FB evict'):
                    evicted = sum(v or 0 for v in x['evicted'])
                    policy, budget = name.split()[2], name.split()[-1]
                    if (policy == 'none' or budget in ('holds', 'unlimited')) and evicted:
                        failures.append('%s %s: evicted %d objects within its budget or under none' % (
                            size, name, evicted))
                    if policy != 'none' and budget in ('half', 'quarter') and not evicted:
                        failures.append('%s %s: evicted nothing past its budget' % (size, name))


def report(args, meta, records, failures, generated):
    os.makedirs(args.out, exist_ok=True)
    checked = cross_check(records, failures)
    failures[:] = list(dict.fromkeys(failures))
    agg = aggregate(records)
    self_checks(agg, failures)
    rep = Report()
    oo_bench.experiment_header(rep, 'The PEVM (Lewis, Mathiske & Gafter 2000) on steppe: OO7', meta)
    oo_bench.experiment_verdict(rep, failures, (
        'Self-checks: every row gave the same answers (visit counts and checksums, every run; %d cross-row '
        'comparisons); the updating runs\' stores reopened to the state their process committed; the resident '
        'row never faulted; the persistent rows faulted in their cold run; no policy evicted within its budget, '
        'and every policy but none evicted past it.\n' % checked))
    rep.add('Protocol (digest 004 §3.1): each operation 5 times in one process, a commit after each run inside the '
            'time; cold = run 1 (a fresh process, OS caches dropped), warm = the mean of runs 2–5; the median '
            'of that over %d round(s). Rows: %s.\n' % (meta['rounds'], '; '.join(
                '**%s**: %s' % (r.name, r.note) for r in ROWS)))
    for size in meta['sizes']:
        rep.add('## OO7 %s (%s atomic parts)\n' % (size, '{:,}'.format(ATOMIC_PARTS[size])))
        transient_tables(rep, size, agg)
        persistent_tables(rep, size, agg)
        derived(rep, size, agg)
        eviction_table(rep, size, agg, meta['evict_iterations'])
    plots = plot(agg, meta, args.out)
    return oo_bench.finish_experiment(args.out, 'pevm', rep, meta['mode'] == 'quick', plots, failures,
                                      {'meta': meta, 'summary': agg, 'generate': generated, 'runs': records},
                                      checked)


def plot(agg, meta, out):
    try:
        from oo_plots import plt  # the harness's plots: matplotlib, Agg backend
    except ImportError as e:
        log('plots skipped: %s' % e)
        return []
    files = []
    for size in meta['sizes']:
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.4))
        # left: warm and cold per op and row, log scale
        ax = axes[0]
        width = 0.2
        for j, row in enumerate(ROWS):
            for phase, hatch in (('warm', ''), ('cold', '//')):
                ys = [get(agg, size, o, row.name, phase) or 0 for o in OPS]
                ax.bar([i + (j - 1.5) * width for i in range(len(OPS))], ys, width, fill=phase == 'warm',
                       hatch=hatch, edgecolor=plt.cm.tab10(j), color=plt.cm.tab10(j),
                       label='%s %s' % (row.name, phase), alpha=1 if phase == 'warm' else .5)
        ax.set_yscale('log')
        ax.set_xticks(range(len(OPS)))
        ax.set_xticklabels([LABEL[o] for o in OPS])
        ax.set_ylabel('ms (a commit after each run)')
        ax.set_title('OO7 %s: warm (filled) and cold (hatched)' % size)
        ax.legend(fontsize=6, ncol=2)
        ax.grid(axis='y', alpha=.3)
        # right: eviction, warm time against the budget, one line per policy
        ax = axes[1]
        ops = agg.get(size, {}).get(EVICT_OP, {})
        for policy in POLICIES:
            xs, ys = [], []
            for bname, frac in BUDGETS:
                x = ops.get(evict_variant(policy, bname))
                if x and x['warm']:
                    xs.append(frac)
                    ys.append(x['warm'])
            ax.plot(xs, ys, marker='o', label=policy)
        ax.set_xscale('log')
        ax.minorticks_off()
        ax.set_xticks([f for _, f in BUDGETS])
        ax.set_xticklabels(['%s (%g)' % (b, f) for b, f in BUDGETS])
        ax.set_xlabel('resident budget / working set')
        ax.set_ylabel('T2a + commit, warm mean (ms)')
        ax.set_title('OO7 %s: eviction policies (fault_block)' % size)
        ax.legend(fontsize=8)
        ax.grid(alpha=.3)
        fig.tight_layout()
        f = os.path.join(out, 'pevm-%s.png' % size)
        fig.savefig(f, dpi=110)
        plt.close(fig)
        files.append(f)
    return files
