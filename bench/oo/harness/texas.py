"""texas.py — Kakkad 1997, "Address translation and storage management for
persistent object stores" (Texas; seed 002, digest 002 ch. 5): issue 17
item 5, the experiment `texas` of experiments.py
(`bench/run --experiment texas --quick|--full`).

Texas's protocol (digest 002 §4.2) on OO1 traversal: 45 traversals in one
process, 1 cold (OS caches dropped before the process) + 34 warm, each from a
new random root + 10 hot repeating the last root; per traversal its time,
its page faults and the miss time by part as the page engine counts it
(store_stats: reading the page = I/O, swizzling, the rest of the handler),
with the kernel's fault delivery estimated, as the paper did, by a fault
loop (bench/micro/fault_bench --delivery) x the faults. Overhead = swizzling
+ handler + delivery, as a share of I/O time and of the traversal's total.

  overhead   all-raw (the page engine as it is) per phase: cold, early warm
             (2-15), late warm (16-35), hot (36-45), cumulative
  growth     the same, cumulative, per database size (Texas: "as the
             database grows")
  granularity  OO1 three ways (§3.8, §4.5): all-raw (raw pointers,
             swizzled at fault time), smart-index (steppe::pref in the
             index only), all-smart (steppe::pref everywhere: nothing
             swizzled, every use translated); cold / early warm and hot

Read-ahead is off (`--prefetch off`): one page read per fault, as Texas had,
so a miss's I/O is its own. Everything on the userfaultfd backend.

Modes: quick (OO1 small, 1 round: every table filled, the three variants'
traversal answers equal, no fault in a hot traversal, nothing swizzled under
all-smart: what CI runs; a few seconds), full (OO1 small, large and huge
(2,000,000 parts), 7 rounds, medians; about 2 minutes here).
"""
import datetime
import os
import re
import shutil
import subprocess
import sys
import time

import oo_bench
from hosking95 import Report, fms, fnum, med, ratio
from oo_bench import OO1, Runner, cross_check, log, machine_info

# (name, system, what the paper calls it)
VARIANTS = [('all-raw', 'steppe-uffd', 'raw pointers everywhere (coarse: PS@PFT)'),
            ('smart-index', 'steppe-smart-index', 'smart pointers in the index only (mixed)'),
            ('all-smart', 'steppe-all-smart', 'smart pointers everywhere (fine)')]
for _, _system, _ in VARIANTS[1:]:  # a store of their own each: their types differ
    oo_bench.FAMILY.setdefault(_system, _system)
    oo_bench.GEN_SYSTEM.setdefault(_system, _system)
    oo_bench.FAMILY_SUFFIXES.setdefault(_system, ['', '-wal'])

WARM, HOT = 34, 10
SERIES = ['--warm', str(WARM), '--hot', str(HOT), '--slope-passes', '0', '--no-pair', '--prefetch', 'off',
          '--budget-s', '600']
MODES = {'quick': (['small'], 1), 'full': (['small', 'large', 'huge'], 7)}

# Traversal numbers (1-based) of each phase; Texas's regions (§5.4.2) were
# I/O-bound 1-7, mixed 8-35, hot 36-45, and its granularity plots the first ~15.
PHASES = [('cold (1)', 1, 1), ('early warm (2-15)', 2, 15), ('late warm (16-35)', 16, 35), ('hot (36-45)', 36, 45),
          ('cumulative cold + warm (1-35)', 1, 35), ('cumulative all (1-45)', 1, 45)]

# The paper's figures (digest 002 §4.4-4.6): Linux 2.0, 200 MHz Pentium Pro, file I/O.
PAPER_OVERHEAD = {
    'cold (1)': 'large: ~1.5 % of I/O (max < 2.5 %), ~2 % of total',
    'early warm (2-15)': 'large: ~1.5 % of I/O, I/O >= 90 % of time; small 1-7 I/O-bound: 2-4 %',
    'late warm (16-35)': 'small: 2-4 % of real I/O; ~300 % of cache-hit "I/O"',
    'hot (36-45)': '0',
    'cumulative cold + warm (1-35)': 'large > 1.5 % of total; small ~2 %',
    'cumulative all (1-45)': 'small ~2 % (Linux), ~3-5 % (Solaris)',
}
PAPER_DELIVERY = 'Linux 2.0: 2,500 cycles (12.5 us at 200 MHz); Solaris 2.5.1: 17,500 (87.5 us)'
PAPER_GRANULARITY = {'cold': 'all-raw > smart-index > all-smart (all-raw highest: it reserves and swizzles most)',
                     'hot': 'all-smart > all-raw ~ smart-index (all-raw 0 overhead)'}


# ---- running ------------------------------------------------------------------------------------

def fault_delivery(args):
    """Texas's fault loop: us per fault delivered to a user handler, SIGBUS
    (userfaultfd, what the page engine gets) and SIGSEGV; {} if not built."""
    build_dir = os.path.dirname(os.path.dirname(os.path.abspath(args.bin_dir)))
    exe = os.path.join(build_dir, 'bench', 'micro', 'fault_bench')
    if os.path.exists(os.path.join(build_dir, 'CMakeCache.txt')):
        subprocess.run(['cmake', '--build', build_dir, '--target', 'fault_bench'], check=False,
                       stdout=subprocess.DEVNULL)
    if not os.path.exists(exe):
        return {}
    p = subprocess.run([exe, '--delivery', '--pages', '20000', '--runs', '7'], stdout=subprocess.PIPE, text=True)
    m = re.search(r'SIGSEGV ([\d.]+) us/fault, SIGBUS \(userfaultfd\) ([-\d.]+) us/fault', p.stdout)
    if p.returncode != 0 or not m:
        return {}
    return {'sigsegv_us': float(m.group(1)), 'sigbus_us': float(m.group(2)), 'output': p.stdout.strip()}


def run(args, exp):
    if args.report_only:
        data = oo_bench.load_results(args.report_only)
        return report(args, data['meta'], data['runs'], list(data['failures']))
    sizes, rounds = MODES[args.mode]
    if args.sizes:
        sizes = args.sizes.split(',')
    rounds = args.rounds or rounds
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.store_dir, exist_ok=True)
    exe = os.path.join(args.bin_dir, 'oo1', 'oo1')
    if not os.path.exists(exe):
        sys.exit('experiments: %s not built (bench/run --experiment texas builds it)' % exe)
    runner = Runner(args, {'oo1': exe}, 600)
    meta = {'date': datetime.datetime.now().strftime('%Y-%m-%d %H:%M'), 'experiment': 'texas', 'mode': args.mode,
            'rounds': rounds, 'sizes': sizes, 'series': SERIES, 'machine': machine_info(args.store_dir),
            'nice': args.nice}
    t0 = time.time()
    meta['delivery'] = fault_delivery(args)
    log('[texas] fault delivery: %s' % (meta['delivery'].get('output') or 'fault_bench not built'))
    for size in sizes:
        runner.generate(OO1, size, [oo_bench.FAMILY[system] for _, system, _ in VARIANTS])
        for rnd in range(1, rounds + 1):
            log('[texas oo1 %s] round %d/%d: 45 traversals per variant' % (size, rnd, rounds))
            k = (rnd - 1) % len(VARIANTS)
            for name, system, _ in VARIANTS[k:] + VARIANTS[:k]:
                runner.measure(OO1, size, 'traversal', system, rnd, SERIES, variant=name)
        if not args.keep_stores:
            shutil.rmtree(os.path.join(args.store_dir, 'oo1', size), ignore_errors=True)
    meta['seconds'] = time.time() - t0
    meta['loadavg_end'] = open('/proc/loadavg').read().split()[:3]
    meta['cold_ok'] = runner.cold_ok
    return report(args, meta, runner.records, runner.failures)


# ---- per traversal ------------------------------------------------------------------------------

def traversals(rec, delivery_us):
    """The record's 45 traversals, each {ms, faults, io, swizzle, handler,
    delivery, reserved} (times in ms); hot ones share the hot phase's counters."""
    s = rec['series']
    per = []
    times = s['cold_ms'] + s['warm_ms']
    for t, c in zip(times, s['iteration_counters']):
        per.append(split(t, c, 1, delivery_us))
    hot = s['counters']['hot']
    for t in s['hot_ms']:
        per.append(split(t, hot, len(s['hot_ms']), delivery_us))
    return per


def split(ms, c, share, delivery_us):
    faults = c.get('store_faults', 0) / share
    return {'ms': ms, 'faults': faults, 'io': c.get('miss_io_ns', 0) / share / 1e6,
            'swizzle': c.get('miss_swizzle_ns', 0) / share / 1e6, 'handler': c.get('miss_handler_ns', 0) / share / 1e6,
            'delivery': faults * (delivery_us or 0) / 1e3, 'reserved': c.get('reserved_virtual_pages', 0) / share,
            'swizzled': c.get('pointers_swizzled', 0) / share, 'majflt': c.get('majflt', 0) / share}


def phase_sum(per, first, last):
    part = per[first - 1:last]
    if len(part) < last - first + 1:
        return None
    out = {k: sum(t[k] for t in part) for k in part[0]}
    out['overhead'] = out['swizzle'] + out['handler'] + out['delivery']
    out['of_io'] = 100 * out['overhead'] / out['io'] if out['io'] else None
    out['of_total'] = 100 * out['overhead'] / out['ms'] if out['ms'] else None
    return out


def phase_medians(recs, delivery_us, first, last):
    """Each quantity of the phase: the median over rounds of its per-round sum."""
    sums = [p for p in (phase_sum(traversals(r, delivery_us), first, last) for r in recs) if p]
    if not sums:
        return None
    return {k: med([p[k] for p in sums]) for k in sums[0]}


def pct(x):
    return '–' if x is None else ('%.1f %%' % x if x < 1000 else '{:,.0f} %'.format(x))


# ---- the report ---------------------------------------------------------------------------------

def report(args, meta, records, failures):
    os.makedirs(args.out, exist_ok=True)
    checked = cross_check(records, failures)
    delivery = meta.get('delivery') or {}
    d_us = delivery.get('sigbus_us') if (delivery.get('sigbus_us') or -1) > 0 else delivery.get('sigsegv_us')
    rep = Report()
    oo_bench.experiment_header(rep, 'Texas (Kakkad 1997) on steppe: page-engine overhead and pointer granularity',
                               meta)
    rep.add('OO1 traversal, Texas\'s protocol: 45 traversals in one process per variant, 1 cold (OS caches dropped '
            'before the process) + %d warm from new random roots + %d hot repeating the last root. Per traversal: '
            'wall time, page faults, and the miss time by part from `store_stats` (reading the page = **I/O**, '
            '**swizzling**, the rest of the **handler**); the kernel\'s **fault delivery** is the fault loop\'s '
            'time per fault x the faults (a lower bound, as in the paper). Overhead = swizzling + handler + '
            'delivery. Read-ahead off (one page read per fault, as Texas). Medians over rounds of per-round sums.\n'
            % (WARM, HOT))
    rep.add('## Fault delivery (the fault loop, Table 7.1)\n')
    rep.need('fault delivery (fault_bench --delivery)', d_us)
    rep.table(['', 'steppe (this machine)', 'paper'],
              [['SIGBUS (userfaultfd: the page engine\'s)', fnum(delivery.get('sigbus_us')) + ' us', PAPER_DELIVERY],
               ['SIGSEGV (PROT_NONE: the mprotect backend\'s)', fnum(delivery.get('sigsegv_us')) + ' us', '']])
    for size in meta['sizes']:
        recs = [r for r in records if r['size_name'] == size and r['op'] == 'traversal']
        by = {name: [r for r in recs if r['system'] == name] for name, _, _ in VARIANTS}
        overhead_table(rep, size, by['all-raw'], d_us)
        granularity_table(rep, size, by, d_us)
    growth_table(rep, meta, records, d_us)
    per_traversal_table(rep, meta, records, d_us)
    self_checks(records, failures)
    plots = plot(args.out, meta, records, d_us)
    return oo_bench.finish_experiment(args.out, 'texas', rep, meta['mode'] == 'quick', plots, failures,
                                      {'meta': meta, 'runs': records}, checked)


def overhead_table(rep, size, recs, d_us):
    rep.add('## OO1 %s: where a traversal\'s time goes (all-raw: the page engine)\n' % size)
    body = []
    for name, first, last in PHASES:
        p = phase_medians(recs, d_us, first, last)
        if not p:
            body.append([name] + ['–'] * 9 + [PAPER_OVERHEAD[name]])
            rep.need('%s %s overhead' % (size, name), None)
            continue
        hot = first > WARM + 1
        body.append([name, fms(p['ms']), fnum(p['faults']), fms(p['io']), fms(p['swizzle']), fms(p['handler']),
                     fms(p['delivery']), fms(p['overhead']),
                     pct(p['of_io']) if not hot or p['io'] else '0 (no I/O)',
                     pct(rep.need('%s %s %% of total' % (size, name), p['of_total'])), PAPER_OVERHEAD[name]])
    rep.table(['phase (traversals)', 'total ms', 'faults', 'I/O ms', 'swizzle ms', 'handler ms', 'delivery ms (est.)',
               'overhead ms', 'overhead / I/O', 'overhead / total', 'paper (Linux)'], body)


def granularity_table(rep, size, by, d_us):
    rep.add('## OO1 %s: granularity (§3.8, §5.6; Figs. 5.39-5.40)\n' % size)
    raw = {ph: phase_medians(by['all-raw'], d_us, f, l) for ph, f, l in PHASES}
    body = []
    for name, _, what in VARIANTS:
        row = [name + ' (' + what + ')']
        for ph, f, l in (PHASES[0], PHASES[1], PHASES[3]):
            p = phase_medians(by[name], d_us, f, l)
            ms = p['ms'] / (l - f + 1) if p else None
            base = raw[ph]['ms'] / (l - f + 1) if raw.get(ph) else None
            row += [fms(rep.need('%s %s %s' % (size, name, ph), ms)) + (' (%s)' % oo_bench.fmt_ratio(ratio(ms, base))
                                                                       if name != 'all-raw' else ''),
                    fnum(p['faults'] if p else None), fnum(p['reserved'] if p else None)]
        body.append(row)
    rep.table(['variant', 'cold ms (x all-raw)', 'faults', 'pages reserved',
               'early warm ms/traversal', 'faults', 'pages reserved', 'hot ms/traversal', 'faults', 'pages reserved'],
              body)
    rep.add('The paper (no absolute numbers): cold/early warm %s; hot %s.\n' % (PAPER_GRANULARITY['cold'],
                                                                             PAPER_GRANULARITY['hot']))


def growth_table(rep, meta, records, d_us):
    rep.add('## Overhead as the database grows (all-raw, cumulative cold + warm, 1-35)\n')
    body = []
    for size in meta['sizes']:
        recs = [r for r in records if r['size_name'] == size and r['system'] == 'all-raw']
        p = phase_medians(recs, d_us, 1, 35)
        if not p:
            continue
        per = (lambda k: 1e3 * p[k] / p['faults'] if p['faults'] else None)
        body.append([size, fnum(oo_bench.OO1_PARTS[size]), fnum(p['faults']), fnum(per('io')), fnum(per('swizzle')),
                     fnum(per('handler')), fnum(d_us), pct(p['of_io']), pct(p['of_total']),
                     {'small': '~2 % of total (Linux)', 'large': '~1.5 % of I/O, > 1.5 % of total'}.get(size, '')])
    rep.table(['size', 'parts', 'faults', 'I/O us/fault', 'swizzle us/fault', 'handler us/fault', 'delivery us/fault',
               'overhead / I/O', 'overhead / total', 'paper'], body)


def per_traversal_table(rep, meta, records, d_us):
    for size in meta['sizes']:
        recs = [r for r in records if r['size_name'] == size]
        raw = [traversals(r, d_us) for r in recs if r['system'] == 'all-raw']
        if not raw:
            continue
        rep.add('## OO1 %s per traversal (medians over rounds)\n' % size)
        other = {name: [traversals(r, d_us) for r in recs if r['system'] == name] for name, _, _ in VARIANTS[1:]}
        body = []
        for i in range(len(raw[0])):
            m = {k: med([t[i][k] for t in raw if i < len(t)]) for k in raw[0][i]}
            oh = m['swizzle'] + m['handler'] + m['delivery']
            body.append([i + 1, fms(m['ms']), fnum(m['faults']), fms(m['io']), fms(oh),
                         pct(100 * oh / m['io'] if m['io'] else None)] +
                        [fms(med([t[i]['ms'] for t in other[n] if i < len(t)])) for n in other])
        rep.table(['#', 'all-raw ms', 'faults', 'I/O ms', 'overhead ms', 'overhead / I/O'] +
                  ['%s ms' % n for n in other], body)


def self_checks(records, failures):
    """What must hold whatever the machine: no fault in a hot traversal, nothing
    swizzled under all-smart (a pref is data), 45 traversals per run."""
    for r in records:
        s = r['series']
        what = 'texas %s %s round %s' % (r['size_name'], r['system'], r.get('round'))
        if len(s['cold_ms']) + len(s['warm_ms']) + len(s['hot_ms']) != 1 + WARM + HOT:
            failures.append('%s: %d traversals, not 45' % (what, len(s['cold_ms']) + len(s['warm_ms']) +
                                                           len(s['hot_ms'])))
        if s['counters']['hot'].get('store_faults', 0):
            failures.append('%s: %d faults in the hot traversals' % (what, s['counters']['hot']['store_faults']))
        if r['system'] == 'all-smart' and any(c.get('pointers_swizzled', 0) for c in s['iteration_counters']):
            failures.append('%s: pointers were swizzled, but every pointer is a steppe::pref' % what)


# ---- plots ---------------------------------------------------------------------------------------

def label_axes(ax, xlabel, ylabel, title):
    ax.set_yscale('log')
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7)
    ax.grid(alpha=.3)


def plot(out, meta, records, d_us):
    try:
        from oo_plots import plt  # matplotlib on the Agg backend
    except ImportError as e:
        log('plots skipped: %s' % e)
        return []
    files = []
    # Cumulative, as the paper's timers (Fig. 5.1): I/O, + swizzling, + handler, + delivery; and the total.
    steps = [(('io',), 'I/O (reading the page)'), (('io', 'swizzle'), '+ swizzling'),
             (('io', 'swizzle', 'handler'), '+ rest of the handler'),
             (('io', 'swizzle', 'handler', 'delivery'), '+ fault delivery (est.)'), (('ms',), 'total')]
    for size in meta['sizes']:
        recs = [r for r in records if r['size_name'] == size]
        raw = [traversals(r, d_us) for r in recs if r['system'] == 'all-raw']
        if not raw:
            continue
        n = len(raw[0])
        m = [{k: med([t[i][k] for t in raw if i < len(t)]) for k in raw[0][i]} for i in range(n)]
        fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
        x = list(range(1, n + 1))
        for i, (keys, label) in enumerate(steps):
            ys = [sum(t[k] for k in keys) for t in m]
            axes[0].plot([a for a, y in zip(x, ys) if y > 0], [y for y in ys if y > 0], marker='o', ms=2.5, lw=1.1,
                         color=plt.cm.tab10(i), label=label, ls='--' if keys == ('ms',) else '-')
        label_axes(axes[0], 'traversal (1 cold, 2-35 warm, 36-45 hot: no faults)', 'ms (log), cumulative',
                   'OO1 %s, all-raw: the miss time, cumulative (Fig. 5.1\'s timers)' % size)
        for i, (name, _, _) in enumerate(VARIANTS):
            per = [traversals(r, d_us) for r in recs if r['system'] == name]
            if per:
                axes[1].plot(x, [med([t[j]['ms'] for t in per if j < len(t)]) for j in range(n)], marker='o',
                             ms=3, lw=1.2, color=plt.cm.tab10(i), label=name)
        label_axes(axes[1], 'traversal', 'ms (log)', 'OO1 %s: granularity, time per traversal' % size)
        fig.tight_layout()
        f = os.path.join(out, 'texas-%s.png' % size)
        fig.savefig(f, dpi=110)
        plt.close(fig)
        files.append(f)
    return files
