"""moss.py — Moss 1990, "Working with persistent objects: to swizzle or not to
swizzle" (seed 003, digest 003): issue 17 item 3, the experiment `moss` of
experiments.py (`bench/run --experiment moss --quick|--full`).

Collections are Moss's binary trees (digest §5.1), every object K slots
(slots 0 and 1 the children), K in Fibonacci steps, about 4 MiB in all (the
`moss` executable, bench/oo/moss). Rows (digest §2): C (non-persistent,
raw pointers in a bump heap), copy and in-place swizzling (the object
engine's fault_block build, ref<T>), in-store through the pointer interface
(peek) and the call interface (read). Per K and row: creation, save (the
commit writing the new collection), a cold load (OS caches dropped; eager:
the first dereference converts everything; lazy and in-store: the first
traversal), traversals without work and reading K slots per visit (hot,
medians), and a session that updates every tenth object and saves (u = 0.1).

  Tables 3, 5, 6, 7, 9-10  linear fits per phase, us/object = a + b*K, R^2
  Model                   load + u*save and the traversal, fitted on half
                          the sizes, predict the session time of the others
                          (goal: within 10 %)
  Break-even              v* = (M_swizzled - M_in-store) / (w2_in-store -
                          w2_swizzled) per K, against Moss's formula
  Worked example          Moss's n = 100,000, b = 40, u = 0.1 and 0.5

The slots are 8-byte words and there is no byte vector, so Moss's separate
terms in bytes, slots and converted slots (p, i) cannot be told apart here:
every fit is in K alone (b = 16 + 8K, p = 8K/b, i = 2/K).
"""
import datetime
import os
import shutil
import statistics
import time

import oo_bench
from hosking95 import Report, fnum, med
from oo_bench import log, machine_info

FIB = [2, 3, 5, 8, 13, 21, 34, 55, 89, 144]
# mode: slot counts, collection bytes, rounds, hot traversals per process
MODES = {'quick': ([2, 5, 13], 256 << 10, 1, 3),
         'full': (FIB, 4 << 20, 3, 5)}
ROWS = [  # name, variant, convert
    ('C', 'c', None), ('copy, lazy', 'copy', 'lazy'), ('copy, eager', 'copy', 'eager'),
    ('in-place, lazy', 'in_place', 'lazy'), ('in-place, eager', 'in_place', 'eager'),
    ('in-store, pointer', 'is_pointer', 'lazy'), ('in-store, call', 'is_call', 'lazy')]
UPDATE_EVERY = 10  # u = 0.1

# The paper's fits (digest 003 §6), us/object: (a, b) in slots; None where it has none.
PAPER_CREATE = {'C': (9.0, None), 'swizzled': (9.5, 0.39), 'in-store, pointer': (32.9, None),
                'in-store, call': (36.6, None)}
PAPER_TRAVERSE = {'C': 11.7, 'swizzled': 13.3, 'in-store, pointer': 20.1, 'in-store, call': 22.1}
PAPER_WORK = {'C': (12.3, 0.41), 'swizzled': (12.7, 0.42), 'in-store, pointer': (20.7, 0.42),
              'in-store, call': (24.3, 0.83)}
# Table 10 per-object load constants (eager, lazy); in-store Table 9.
PAPER_LOAD = {'copy': (12, 29), 'in-place': (13, 25), 'in-store, pointer': (28.6, None),
              'in-store, call': (28.5, None)}


def object_bytes(k):
    return 16 + 8 * k


def height_for(k, total):
    h = 1
    while ((1 << (h + 1)) - 1) * object_bytes(k) <= total:
        h += 1
    return h


def fit(points):
    """Least squares y = a + b*x over (x, y) points: (a, b, R^2)."""
    pts = [(x, y) for x, y in points if y is not None]
    if len(pts) < 2:
        return None
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return None
    b = sum((x - mx) * (y - my) for x, y in pts) / sxx
    a = my - b * mx
    ss = sum((y - my) ** 2 for y in ys)
    res = sum((y - a - b * x) ** 2 for x, y in pts)
    return a, b, (1 - res / ss) if ss else 1.0


def at(line, k):
    return line[0] + line[1] * k if line else None


# ---- running ------------------------------------------------------------------------------------

def run(args):
    if args.report_only:
        data = oo_bench.load_results(args.report_only)
        os.makedirs(args.out, exist_ok=True)
        return report(args, data['meta'], data['runs'], list(data['failures']))
    slots, total, rounds, visits = MODES[args.mode]
    rounds = args.rounds or rounds
    exe = os.path.join(args.bin_dir, 'moss', 'moss')
    if not os.path.exists(exe):
        raise SystemExit('experiments: %s not built (bench/run --experiment moss builds it)' % exe)
    os.makedirs(args.out, exist_ok=True)
    store_dir = os.path.join(args.store_dir, 'moss')
    os.makedirs(store_dir, exist_ok=True)
    runner = oo_bench.Runner(args, {'moss': exe}, 0)
    bench = type('B', (), {'name': 'moss'})
    meta = {'date': datetime.datetime.now().strftime('%Y-%m-%d %H:%M'), 'experiment': 'moss', 'mode': args.mode,
            'rounds': rounds, 'slots': slots, 'collection_bytes': total, 'visits': visits,
            'machine': machine_info(args.store_dir), 'nice': args.nice, 'cold_ok': True}
    t0, records = time.time(), []
    for rnd in range(1, rounds + 1):
        for k in slots:
            h = height_for(k, total)
            log('[moss] round %d/%d: K = %d slots, %d objects' % (rnd, rounds, k, (1 << h) - 1))
            common = ['--slots', str(k), '--height', str(h), '--visits', str(visits), '--work', str(k)]
            for variant in ('c', 'copy', 'in_place', 'is_pointer', 'is_call'):
                path = os.path.join(store_dir, '%s-%d.ods' % (variant, k))
                for f in (path, path + '-log'):
                    if os.path.exists(f):
                        os.remove(f)
                rec = runner.run(bench, ['build', '--variant', variant, '--store', path] + common,
                                 'moss build %s K=%d' % (variant, k))
                if rec:
                    records.append(dict(rec, phase='build', round=rnd))
                for name, v, convert in ROWS:
                    if v != variant or v == 'c':
                        continue
                    meta['cold_ok'] &= oo_bench.drop_caches()
                    rec = runner.run(bench, ['run', '--variant', v, '--store', path, '--convert', convert,
                                             '--update-every', str(UPDATE_EVERY)] + common,
                                     'moss run %s K=%d' % (name, k))
                    if rec:
                        records.append(dict(rec, phase='run', row=name, round=rnd))
                if not args.keep_stores:
                    for f in (path, path + '-log'):
                        if os.path.exists(f):
                            os.remove(f)
    meta['seconds'] = time.time() - t0
    meta['loadavg_end'] = list(map(str, os.getloadavg()))
    if not args.keep_stores:
        shutil.rmtree(store_dir, ignore_errors=True)
    return report(args, meta, records, runner.failures)


# ---- aggregating --------------------------------------------------------------------------------

def value(records, phase, key, k, row=None, variant=None):
    return med([r.get(key) for r in records if r['phase'] == phase and r['slots'] == k and
                (row is None or r.get('row') == row) and (variant is None or r['variant'] == variant)])


def build_series(records, slots, key, variant):
    return [(k, value(records, 'build', key, k, variant=variant)) for k in slots]


def run_series(records, slots, key, row, credit=False):
    """(K, us/object) of a run phase; `credit`: less one no-work traversal (the load's own)."""
    out = []
    for k in slots:
        v = value(records, 'run', key, k, row=row)
        t = value(records, 'run', 'traverse_us', k, row=row)
        out.append((k, v - t if credit and v is not None and t is not None else v))
    return out


def fit_cells(rep, what, line):
    a, b, r2 = line if line else (None, None, None)
    return [fnum(rep.need(what + ' a', a)), fnum(rep.need(what + ' b', b)), fnum(rep.need(what + ' R2', r2), 4)]


def paper_pair(p):
    return '%s / %s' % (fnum(p[0]), fnum(p[1]) if p[1] is not None else '–') if p else '–'


SWIZZLED = {'copy, lazy', 'copy, eager', 'in-place, lazy', 'in-place, eager'}


def paper_key(row):
    return 'swizzled' if row in SWIZZLED or row in ('copy', 'in-place') else row


def session(records, k, row, v):
    """A load-work-save session per object at K: load (its traversal credited),
    v no-work traversals, the save of u = 0.1 updated objects."""
    load = value(records, 'run', 'load_us', k, row=row)
    w2 = value(records, 'run', 'traverse_us', k, row=row)
    save = value(records, 'run', 'save_updated_us', k, row=row)
    if None in (load, w2, save):
        return None
    return load - w2 + v * w2 + save / UPDATE_EVERY


# ---- the report ---------------------------------------------------------------------------------

def report(args, meta, records, failures):
    slots = meta['slots']
    rep = Report()
    oo_bench.experiment_header(rep, 'Moss 1990 on steppe: to swizzle or not to swizzle', meta)
    rep.add('Binary trees of about %s in all, every object K slots of 8 bytes (b = 16 + 8K bytes with '
            'its header), K = %s; %d hot traversals per process; a session updates every %dth object. All times '
            'µs per object, medians over %d round(s). Moss\'s figures are from a 16.7 MHz DECstation 3100 '
            '(digest 003 §5.4): compare forms and ratios, not µs.\n' % (
                oo_bench.fmt_bytes(meta['collection_bytes']), ', '.join(map(str, slots)),
                meta['visits'], UPDATE_EVERY, meta['rounds']))
    creation(rep, records, slots)
    traversal(rep, records, slots)
    loading(rep, records, slots)
    model(rep, records, slots)
    plots = plot(args.out, records, slots)
    results = {'meta': meta, 'runs': records}
    checked = len({(r['slots'], r['row']) for r in records if r['phase'] == 'run'})
    return oo_bench.finish_experiment(args.out, 'moss', rep, meta['mode'] == 'quick', plots, failures, results,
                                      checked)


def creation(rep, records, slots):
    rep.add('## Creation and save (Tables 3 and 7)\n')
    rep.add('Creation makes the tree (in the engine\'s heap for the swizzled rows, straight into segments in '
            'store for in-store, whose call row sets each slot with `write`); save is the commit that writes it '
            '(durable, one fdatasync), whose per-object work Moss split into prepare (Table 7: 27.5 µs per new '
            'object in-place, 30.4 copy, 39.0 call, + 0.4 per slot) and the write (~321 kB/s).\n')
    body = []
    c_create = fit(build_series(records, slots, 'create_us', 'c'))
    for name, variant in (('C', 'c'), ('copy', 'copy'), ('in-place', 'in_place'),
                          ('in-store, pointer', 'is_pointer'), ('in-store, call', 'is_call')):
        create = fit(build_series(records, slots, 'create_us', variant))
        save = fit(build_series(records, slots, 'save_us', variant)) if variant != 'c' else None
        cells = [name] + fit_cells(rep, 'create ' + name, create)
        cells += [fnum(at(create, 5) / at(c_create, 5)) if create and c_create else '–',
                  paper_pair(PAPER_CREATE.get(paper_key(name)))]
        cells += fit_cells(rep, 'save ' + name, save) if variant != 'c' else ['–', '–', '–']
        body.append(cells)
    rep.table(['row', 'create a', 'create b', 'R²', '× C at K = 5', 'paper a / b', 'save a', 'save b', 'R²'], body)
    rep.add('Moss: in-store creation 3.7–4.2× C (pre-zeroed store space), swizzled 1.05×. Here the swizzled rows '
            'create through `make` into the engine\'s heap and in-store through `create` into a segment buffer, '
            'each with the bookkeeping of a real store (catalog lookups, card marks), so both sit well above a bump '
            'allocator: the ordering, not the ratio, is what carries over.\n')


def traversal(rep, records, slots):
    rep.add('## Traversal without work and with work (Tables 5 and 6)\n')
    body = []
    c_trav = [value(records, 'build', 'traverse_us', k, variant='c') for k in slots]
    c_med = med(c_trav)
    for name in ['C'] + [r[0] for r in ROWS[1:]]:
        if name == 'C':
            trav = c_med
            work = fit(build_series(records, slots, 'work_us', 'c'))
        else:
            trav = med([value(records, 'run', 'traverse_us', k, row=name) for k in slots])
            work = fit(run_series(records, slots, 'work_us', name))
        p = paper_key(name)
        body.append([name, fnum(rep.need('traverse ' + name, trav)), fnum(trav / c_med if trav and c_med else None),
                     fnum(PAPER_TRAVERSE[p] / PAPER_TRAVERSE['C']) if p in PAPER_TRAVERSE else '–']
                    + fit_cells(rep, 'work ' + name, work) + [paper_pair(PAPER_WORK.get(p))])
    rep.table(['row', 'no work, µs/object (median over K)', '× C', 'paper × C', 'reading K slots: a', 'b', 'R²',
               'paper a / b'], body)
    rep.add('Moss: swizzled 1.08–1.14× C (the check and the modified bit), in-store pointer 1.72×, call 1.89×; '
            'the per-slot slopes of C, swizzled and in-store pointer equal (0.41–0.42), the call interface\'s '
            'double. Today a swizzled dereference is a load and a test, the same order as C\'s load, while '
            'locating an object in store (a hash lookup of its segment, the slot, the type check) costs tens of '
            'loads: the in-store rows fall much further behind than on a 1990 CPU, where a memory access was '
            'a larger share of everything.\n')


def loading(rep, records, slots):
    rep.add('## Loading, eager and lazy (Tables 9 and 10), and the save of an updated session\n')
    rep.add('A load is the first access after opening with the OS caches dropped: eager converts the whole tree at '
            'the first dereference, lazy (and in-store, intrinsically lazy) during the first traversal; one '
            'no-work traversal is credited back, as Moss did. The updated save is the commit after a traversal '
            'that swapped the children of every %dth object, per object updated.\n' % UPDATE_EVERY)
    body = []
    for name, _, _ in ROWS[1:]:
        load = fit(run_series(records, slots, 'load_us', name, credit=True))
        saved = fit(run_series(records, slots, 'save_updated_us', name))
        base = name.split(',')[0] if name in SWIZZLED else name
        paper = PAPER_LOAD.get(base)
        pcell = '–'
        if paper:
            pcell = fnum(paper[0] if 'lazy' not in name or paper[1] is None else paper[1])
        body.append([name] + fit_cells(rep, 'load ' + name, load) + [pcell] + fit_cells(rep, 'updated save ' + name,
                                                                                       saved))
    rep.table(['row', 'load a', 'load b', 'R²', 'paper per object', 'updated save a', 'b', 'R²'], body)
    ratios = []
    for base in ('copy', 'in-place'):
        e = [x for _, x in run_series(records, slots, 'load_us', base + ', eager', credit=True)]
        lz = [x for _, x in run_series(records, slots, 'load_us', base + ', lazy', credit=True)]
        r = med([a / b for a, b in zip(e, lz) if a and b])
        ratios.append('%s %s' % (base, fnum(rep.need('eager/lazy ' + base, r))))
    rep.add('Eager / lazy load (median over K): %s. Moss: eager 2–15 %% faster (0.84–0.99), which he could not '
            'explain; lazy pays a fault per segment met, eager one recursive pass.\n' % ', '.join(ratios))


def model(rep, records, slots):
    rep.add('## The cost model: fitted on half the sizes, predicting the rest; the break-even\n')
    rep.add('Per row, the load (its traversal credited), the no-work traversal w2 and the updated save are each '
            'fitted as a + b·K on the sizes at even positions (%s) and predict a session of v = 10 visits, '
            'u = 0.1 at the others; measured = load − w2 + 10·w2 + save/10 from the same runs. Moss validated his '
            'model by its fit alone (< 1 %% unexplained variance).\n' % ', '.join(map(str, slots[::2])))
    train, test = slots[::2], slots[1::2]
    body, worst = [], 0.0
    for name, _, _ in ROWS[1:]:
        lines = {key: fit(run_series(records, train, key, name, credit=(key == 'load_us')))
                 for key in ('load_us', 'traverse_us', 'save_updated_us')}
        for k in test:
            predicted = None
            if all(lines.values()):
                predicted = at(lines['load_us'], k) + 10 * at(lines['traverse_us'], k) + \
                    at(lines['save_updated_us'], k) / UPDATE_EVERY
            measured = session(records, k, name, 10)
            err = (predicted / measured - 1) * 100 if predicted and measured else None
            if err is not None:
                worst = max(worst, abs(err))
            body.append([name, k, fnum(rep.need('predicted %s %d' % (name, k), predicted)), fnum(measured),
                         '%+.1f %%' % err if err is not None else '–'])
    if test:
        rep.table(['row', 'K', 'predicted µs/object', 'measured', 'error'], body)
        rep.add('Worst prediction error: %.1f %% (goal: within 10 %%).\n' % worst)
    breakeven(rep, records, slots)
    worked_example(rep, records, slots)


def breakeven(rep, records, slots):
    rep.add('### Break-even visits v* (in-store pointer against swizzling, u = 0.1)\n')
    rep.add('v* = (M_swizzled − M_in-store) / (w2_in-store − w2_swizzled), M = load (traversal credited) + '
            'u·save per object; below v* visits per object in-store is cheaper. Moss (eager in-place, i = 1): '
            'v* = 1.17 + 0.76u + 0.025b + 0.26pb, about 10 ± 5 at b = 50.\n')
    body = []
    for k in slots:
        b, p = object_bytes(k), 8 * k / object_bytes(k)
        cells = [k, b]
        for row in ('in-place, eager', 'copy, eager', 'copy, lazy'):
            m_s, m_is = session(records, k, row, 0), session(records, k, 'in-store, pointer', 0)
            w_s = value(records, 'run', 'traverse_us', k, row=row)
            w_is = value(records, 'run', 'traverse_us', k, row='in-store, pointer')
            v = (m_s - m_is) / (w_is - w_s) if None not in (m_s, m_is, w_s, w_is) and w_is != w_s else None
            cells.append(fnum(rep.need('v* %s %d' % (row, k), v)))
        cells.append(fnum(1.17 + 0.76 * 0.1 + 0.025 * b + 0.26 * p * b))
        body.append(cells)
    rep.table(['K', 'b', 'v* in-place eager', 'v* copy eager', 'v* copy lazy', 'Moss\'s formula'], body)
    rep.add('A negative v* means the swizzled row already loads and saves for less than in-store, so it wins at '
            'any number of visits; a large positive one, that a segment read into a buffer and used there costs '
            'far less than converting it, while the per-visit gap (w2) is small.\n')


def worked_example(rep, records, slots):
    rep.add('### Moss\'s worked example (digest 003 §7.2)\n')
    k = min(slots, key=lambda s: abs(object_bytes(s) - 40))
    n, v, w = 100000, 10, 20.0
    rep.add('n = 100,000 objects of b = %d bytes (K = %d; Moss: b = 40, p = 0.5), v = 10 visits, w = 20 µs of '
            'work per visit (Moss\'s), u = 0.1 and 0.5; load + save and totals in seconds from this run\'s '
            'measurements at K = %d.\n' % (object_bytes(k), k, k))
    body = []
    for name in ('in-store, pointer', 'in-place, eager', 'copy, eager', 'copy, lazy'):
        load = value(records, 'run', 'load_us', k, row=name)
        w2 = value(records, 'run', 'traverse_us', k, row=name)
        save = value(records, 'run', 'save_updated_us', k, row=name)
        cells = [name]
        for u in (0.1, 0.5):
            if None in (load, w2, save):
                cells += ['–', '–']
                continue
            ls = n * (load - w2 + u * save) / 1e6
            total = ls + n * v * (w2 + w) / 1e6
            cells += [fnum(rep.need('example %s %s' % (name, u), ls)), fnum(total)]
        body.append(cells)
    rep.table(['row', 'load+save (u = 0.1), s', 'total (u = 0.1), s', 'load+save (u = 0.5), s',
               'total (u = 0.5), s'], body)
    rep.add('Moss: load + save IS 9.3 s, C 14.6, IP 15.3 (u = 0.1), all three totals 48 s (54 s at u = 0.5): the '
            '20 µs of work per visit dwarfs every access mechanism, on his machine and more so on this one, where '
            'loading, saving and visiting take microseconds at most.\n')


def plot(out, records, slots):
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for name, _, _ in ROWS[1:]:
        axes[0].plot(slots, [x for _, x in run_series(records, slots, 'traverse_us', name)], marker='o', label=name)
        axes[1].plot(slots, [x for _, x in run_series(records, slots, 'load_us', name, credit=True)], marker='o',
                     label=name)
    axes[0].plot(slots, [value(records, 'build', 'traverse_us', k, variant='c') for k in slots], marker='o',
                 label='C', color='black')
    axes[0].set(title='no-work traversal', xlabel='slots per object (K)', ylabel='µs / object', xscale='log',
                yscale='log')
    axes[1].set(title='cold load (traversal credited)', xlabel='slots per object (K)', ylabel='µs / object',
                xscale='log')
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    path = os.path.join(out, 'moss.png')
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]
