"""hosking95.py — Hosking 1995, "Benchmarking persistent programming languages"
(seed 001, digest 001): issue 17 item 2, the experiment `hosking-1995` of
experiments.py (`bench/run --experiment hosking-1995 --quick|--full`).

  Table 1   read barrier: OO1 traversal cold / warm / hot for non-persistent
            and each residency check steppe has (ID lazy, ID + self-heal, FB
            opportunistic, trap), with instructions and cache misses per hot
            traversal from the hardware counters the machine exposes
            (perf_event_open: "unavailable" with the reason where it does not),
            the TSC always, and, in --full mode when valgrind is installed,
            callgrind's exact instruction counts and simulated cache misses.
            The paper's eagerness axis is options::swizzle (--swizzle).
  Table 2   write barrier: the OO1 update traversal (each visit modifies its
            part with probability p, 2 updates), hot, in a long-running
            transaction: cycles (TSC) and instructions per modified part, and
            the net cost per update = ((p=1) - (p=0) of the scheme, measured
            alternately in one process) - (the same for non-persistent), / 2.
  Figure 1  checkpoint (= commit) latency against update probability, one
            update traversal per checkpoint, every part resident.
  Table 3   the break-even number of traversals per checkpoint of pages
            against cards-4096: t = (ckpt_pages - ckpt_cards) /
            ((net_cards - net_pages) per update x 2 x m).
  Log volume per scheme (bytes logged per commit): page-granularity
            differences; sub-page difference logging is not built.

Schemes (WRITE below): objects (fault_block + object_flag), remsets
(+ remembered_set), cards-16 ... cards-4096 (+ cards, --card-bytes), pages
(the object engine's heap under vm write tracking, and the page engine),
each pages variant under STEPPE_WRITE_TRACKING=wp_async | wp_sync | mprotect.
"""
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

import oo_bench
from oo_bench import OO1, Runner, cross_check, log, machine_info

# ---- the paper's figures (digest 001; 40 MHz SPARCstation 2) -----------------------------------

# cold, warm, hot (s); hot I refs, I misses, R misses, W misses per traversal
PAPER_T1 = {
    'non-persistent': (0.056, 0.056, 0.0547, 1016219, 6983, 9109, 50),
    'ID, lazy': (2.3, 0.11, 0.066, 1303593, 7083, 10584, 323),
    'ID, opportunistic': (2.5, 0.11, 0.056, 1039126, 6823, 9361, 271),
    'FB, opportunistic': (2.5, 0.12, 0.0553, 1027172, 6866, 9445, 251),
    'ID, eager': (3.9, 0.13, 0.055, 1016224, 6771, 8969, 230),
    'FB, eager': (3.9, 0.14, 0.055, 1016230, 6785, 8957, 234),
    'trap, eager': (4.7, 0.16, 0.055, None, None, None, None),
}
# Table 2: per modified part (cycles, instructions), net per update (cycles, instructions)
PAPER_T2 = {
    'non-persistent': (159, 81, 0, 0), 'objects': (173, 89, 7, 4), 'remsets': (249, 139, 45, 29),
    'cards-16': (188, 89, 15, 4), 'cards-64': (185, 89, 13, 4), 'cards-256': (183, 87, 12, 3),
    'cards-1024': (184, 89, 13, 4), 'cards-4096': (185, 89, 13, 4), 'pages': (169, 81, 5, 0),
}
PAPER_PAGES_RAW = (219, 81, 30, 0)
# Table 3: p -> (pages checkpoint s, cards-4096 checkpoint s, parts modified per traversal, break-even t)
PAPER_T3 = {0.0: (0.152, 0.077, 0, None), 0.05: (0.282, 0.135, 98, 2308), 0.1: (0.358, 0.184, 252, 1062),
            0.15: (0.42, 0.221, 490, 625), 0.2: (0.43, 0.229, 632, 489), 0.5: (0.60, 0.350, 1577, 244),
            1.0: (0.744, 0.455, 3280, 136)}
PAPER_MHZ = 40.0


class Row:
    """A row of the paper and how steppe runs it: `system` and `extra`
    arguments, or `why` it is not built. `paper` names the paper's row it is
    compared with (None: steppe's extra)."""

    def __init__(self, name, system, extra=(), paper=None, note='', why=None, kind='persistent', env=None):
        self.name, self.system, self.extra, self.paper = name, system, list(extra), paper
        self.note, self.why, self.kind, self.env = note, why, kind, env

    @property
    def built(self):
        return self.system is not None



# Table 1. The eager rows become runs by filling `system` and `extra` (e.g.
# 'objects-fb', ['--conversion', 'eager'] once oo1 passes such an option to
# steppe::objects::options in objects_support.hpp's open_object_store).
READ = [
    Row('non-persistent', 'transient', paper='non-persistent', kind='resident',
        note='the same OO1 source over raw pointers and std::allocator, built in the measuring process'),
    Row('ID, lazy', 'objects-id', paper='ID, lazy',
        note='`id`: a tagged id in every slot, looked up in the resident object table at every use, the slot '
             'never patched: the paper\'s lazy ID'),
    Row('ID + self-heal', 'objects-idsh', paper=None,
        note='`id_self_heal` (the PEVM\'s lazy direct swizzling): a tagged id until a slot\'s first use, which '
             'patches the slot with the address. No row of the paper: converted at use like lazy (cold pays '
             'lazy\'s lookups plus a store), but the slot keeps the address, so once warm every traversed slot '
             'is direct as under eager (hot compares with ID, eager)'),
    Row('ID, opportunistic', 'objects-id', ['--swizzle', 'opportunistic'], paper='ID, opportunistic',
        note='`id` with `swizzling::opportunistic`: an arriving segment\'s references to objects already in memory '
             'become addresses (their targets pinned), the others tagged ids looked up at every use'),
    Row('FB, opportunistic', 'objects-fb', paper='FB, opportunistic',
        note='`fault_block`: an arriving segment\'s references to objects in memory become addresses, the others '
             'fault blocks (Hosking\'s opportunistic); a slot that led to a fault block is patched at its use'),
    Row('ID, eager', 'objects-id', ['--swizzle', 'eager'], paper='ID, eager',
        note='`id` with `swizzling::eager`: as opportunistic, and when an object arrives every slot swizzled to its '
             'tagged id gets its address'),
    Row('FB, eager', 'objects-fb', ['--swizzle', 'eager'], paper='FB, eager',
        note='`fault_block` with `swizzling::eager`: when an object arrives every slot swizzled to its fault block '
             'gets its address'),
    Row('trap, eager', 'objects-pf', paper='trap, eager',
        note='`page_fault`: fault blocks at PROT_NONE addresses, the check one load that traps; when an object '
             'comes in every slot swizzled to its block is patched (the paper\'s eager, within what is in memory)'),
]

CARDS = [16, 64, 256, 1024, 4096]
# Rows whose checkpoints run a second time with sub-page difference logging
# off, for the log volume it saves (the report's log volume table).
WHOLE_PAGE_ROWS = ['cards-4096', 'pages, object heap (wp_async)', 'pages, page engine (wp_async)']
WHOLE_PAGES = '%s, whole pages logged'
TRACKING = ['wp_async', 'wp_sync', 'mprotect']

# Table 2, Figure 1, Table 3, log volume.
WRITE = ([Row('non-persistent', 'transient', paper='non-persistent', kind='transient',
              note='raw pointers, std::allocator: the update is two stores')] +
         [Row('objects', 'objects-fb-flag', paper='objects',
              note='fault_block + object_flag: mut() sets a header bit; commit walks every object in the heap'),
          Row('remsets', 'objects-fb-remset', paper='remsets',
              note='fault_block + remembered_set: the first mut() since the commit sets the bit and appends the '
                   'object to a list (a call); commit walks the list')] +
         [Row('cards-%d' % c, 'objects-fb', ['--card-bytes', str(c)], paper='cards-%d' % c,
              note='fault_block + cards, options::card_bytes = %d: mut() marks the card of the object\'s header; '
                   'commit walks the objects of marked cards' % c) for c in CARDS] +
         [Row('pages, object heap (%s)' % t, 'objects-fb-pages', ['--write-tracking', t], paper='pages',
              kind='pages', note='fault_block + pages: mut() does nothing; the heap is a vm arena under %s write '
                                 'tracking; commit diffs the objects of written pages' % t) for t in TRACKING] +
         [Row('pages, page engine (%s)' % t, 'steppe-uffd', ['--write-tracking', t], paper='pages', kind='pages',
              note='the page engine (raw pointers), %s write tracking; commit writes the pages written' % t)
          for t in TRACKING])

MODES = {
    # sizes, rounds, read series, update series, (--perf repeats per pass, passes), checkpoint
    # probabilities, cycles per probability. Short passes, many of them: the fastest is one nothing preempted.
    'quick': (['tiny'], 1, ['--warm', '9', '--hot', '5', '--slope', '8', '--slope-passes', '1', '--budget-s', '10'],
              ['--warm', '3', '--hot', '3', '--slope', '4', '--slope-passes', '1', '--no-pair', '--budget-s', '10'],
              (10, 5), [0, 0.01, 0.1, 0.5, 1], 2),
    'full': (['small'], 5, ['--warm', '9', '--hot', '10', '--slope', '256', '--slope-passes', '3', '--budget-s', '90'],
             ['--warm', '9', '--hot', '10', '--slope', '64', '--slope-passes', '3', '--no-pair', '--budget-s', '90'],
             (20, 41), [0, 0.01, 0.05, 0.1, 0.2, 0.5, 1], 5),
}


# ---- helpers ----------------------------------------------------------------------------------

def med(v):
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None


def fnum(x, digits=3):
    if x is None:
        return '–'
    if abs(x) >= 1000:
        return '{:,.0f}'.format(x)
    return ('%%.%dg' % digits) % x


def fms(x):
    return oo_bench.fmt_ms(x)


def rt(x):
    return oo_bench.fmt_ratio(x)


def ratio(a, b):
    return a / b if a is not None and b else None


class Report:
    def __init__(self):
        self.lines, self.missing = [], []

    def add(self, *ls):
        self.lines.extend(ls)

    def table(self, header, body):
        self.add('| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header))
        for b in body:
            self.add('| ' + ' | '.join(str(c) for c in b) + ' |')
        self.add('')

    def need(self, what, x):
        if x is None:
            self.missing.append(what)
        return x


def describe_ok(row, rec):
    """What the run says it was, against what the row asked for (card size, write tracking)."""
    d = rec.get('describe', '')
    if '--card-bytes' in row.extra:
        want = 'cards-' + row.extra[row.extra.index('--card-bytes') + 1]
        if want + ',' not in d and not d.endswith(want):
            return 'asked for %s, the store says: %s' % (want, d)
    if '--write-tracking' in row.extra:
        want = row.extra[row.extra.index('--write-tracking') + 1]
        if want not in d:
            return 'asked for write tracking %s, the store says: %s' % (want, d)
    return None


UNAVAILABLE_RE = re.compile(r'is not available with the|not available')


class Runs:
    """Runs one measuring process per (row, round) through oo_bench.Runner and
    keeps what each row gave; a write-tracking variant this kernel lacks is
    recorded as unavailable, not as a failure."""

    def __init__(self, runner):
        self.runner = runner
        self.unavailable = {}  # row name -> why

    def fail_to_unavailable(self, row, n_before):
        new = self.runner.failures[n_before:]
        if new and all(UNAVAILABLE_RE.search(f) for f in new) and '--write-tracking' in row.extra:
            del self.runner.failures[n_before:]
            self.unavailable[row.name] = new[0].split(': ', 1)[-1][:300]
            return True
        return False


# ---- running ------------------------------------------------------------------------------------

def run(args, exp):
    if args.report_only:
        data = oo_bench.load_results(args.report_only)
        return report(args, data['meta'], data['runs'], list(data['failures']), data.get('unavailable', {}),
                      data.get('callgrind', []))
    sizes, rounds, cfg_read, cfg_update, perf_reps, probs, cycles = MODES[args.mode]
    if args.sizes:
        sizes = args.sizes.split(',')
    rounds = args.rounds or rounds
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.store_dir, exist_ok=True)
    exe = os.path.join(args.bin_dir, 'oo1', 'oo1')
    if not os.path.exists(exe):
        sys.exit('experiments: %s not built (bench/run --experiment hosking-1995 builds it)' % exe)
    runner = Runner(args, {'oo1': exe}, float(cfg_read[cfg_read.index('--budget-s') + 1]))
    runs = Runs(runner)
    meta = {'date': datetime.datetime.now().strftime('%Y-%m-%d %H:%M'), 'experiment': 'hosking-1995',
            'mode': args.mode, 'rounds': rounds, 'sizes': sizes, 'config_read': cfg_read,
            'config_update': cfg_update, 'perf_reps': perf_reps, 'probabilities': probs, 'cycles': cycles,
            'machine': machine_info(args.store_dir), 'nice': args.nice}
    t0 = time.time()
    read_rows = [r for r in READ if r.built]
    write_rows = [r for r in WRITE if r.built]
    families = sorted({oo_bench.FAMILY[r.system] for r in read_rows + write_rows if oo_bench.FAMILY[r.system]})
    callgrind = []
    for size in sizes:
        runner.generate(OO1, size, families)
        for rnd in range(1, rounds + 1):
            log('[hosking-1995 oo1 %s] round %d/%d: read barrier (Table 1)' % (size, rnd, rounds))
            k = (rnd - 1) % len(read_rows)
            for row in read_rows[k:] + read_rows[:k]:
                runner.measure(OO1, size, 'traversal', row.system, rnd, cfg_read + perf_args(perf_reps),
                               variant=row.name, extra=row.extra)
            log('[hosking-1995 oo1 %s] round %d/%d: write barrier, update traversal p = 1 (Table 2)' % (size, rnd, rounds))
            k = (rnd - 1) % len(write_rows)
            for row in write_rows[k:] + write_rows[:k]:
                if row.name in runs.unavailable:
                    continue
                n = len(runner.failures)
                runner.measure(OO1, size, 'update', row.system, rnd,
                               cfg_update + ['--update-prob', '1'] + perf_args(perf_reps),
                               variant=row.name, extra=row.extra)
                runs.fail_to_unavailable(row, n)
            log('[hosking-1995 oo1 %s] round %d/%d: checkpoint latency (Figure 1)' % (size, rnd, rounds))
            for row in write_rows[k:] + write_rows[:k]:
                if row.kind == 'transient' or row.name in runs.unavailable:
                    continue
                n = len(runner.failures)
                checkpoint(runner, size, row, rnd, probs, cycles)
                if row.name in WHOLE_PAGE_ROWS:
                    checkpoint(runner, size, row, rnd, probs, cycles, whole_pages=True)
                runs.fail_to_unavailable(row, n)
        if args.callgrind:
            callgrind += run_callgrind(args, size, read_rows, write_rows, runs)
        if not args.keep_stores:
            shutil.rmtree(os.path.join(args.store_dir, 'oo1', size), ignore_errors=True)
    meta['seconds'] = time.time() - t0
    meta['loadavg_end'] = open('/proc/loadavg').read().split()[:3]
    meta['cold_ok'] = runner.cold_ok
    return report(args, meta, runner.records, runner.failures, runs.unavailable, callgrind)


def perf_args(perf):
    return ['--perf', str(perf[0]), '--perf-passes', str(perf[1])]


def checkpoint(runner, size, row, rnd, probs, cycles, whole_pages=False):
    """One `oo1 checkpoint` process on a copy of the pristine store, then a
    reopen that must find the state the process committed. whole_pages: with
    sub-page difference logging off, recorded as WHOLE_PAGES % row.name."""
    fam = oo_bench.FAMILY[row.system]
    path = runner.copy_store(OO1, size, fam)
    oo_bench.drop_caches()
    name = WHOLE_PAGES % row.name if whole_pages else row.name
    what = 'oo1 %s checkpoint %s round %d' % (size, name, rnd)
    cmd = ['checkpoint', '--system', row.system, '--path', path, '--parts', str(oo_bench.OO1_PARTS[size]),
           '--probs', ','.join(str(p) for p in probs), '--cycles', str(cycles)] + row.extra
    if whole_pages:
        cmd += ['--log-diffs', 'off']
    rec = runner.run(OO1, cmd, what)
    if not rec:
        return
    v = runner.run(OO1, ['verify', '--system', row.system, '--path', path, '--parts', str(oo_bench.OO1_PARTS[size]),
                         '--max-id', str(oo_bench.OO1_PARTS[size])] + row.extra, 'verify ' + what)
    rec['verified_after_reopen'] = bool(v and v.get('ok') and v.get('state') == rec.get('final_state'))
    if v and v.get('state') != rec.get('final_state'):
        runner.failures.append('VERIFY %s: the reopened store holds state %s, the committing process saw %s' % (
            what, v.get('state'), rec.get('final_state')))
    rec.update({'size_name': size, 'round': rnd, 'system': name, 'executable_system': row.system})
    runner.records.append(rec)
    ps = rec['probabilities']
    log('  %-32s checkpoint ms at p = %s: %s' % (name, ', '.join('%g' % p['p'] for p in ps), ', '.join(
        fms(med(p['commit_ms'])) for p in ps)))


# ---- callgrind (exact instruction counts, simulated caches) -------------------------------------

def parse_callgrind(path):
    events, totals = None, None
    with open(path) as f:
        for line in f:
            if line.startswith('events:'):
                events = line.split()[1:]
            elif line.startswith('summary:') or line.startswith('totals:'):
                totals = [int(x) for x in line.split()[1:]]
    if not events or not totals:
        return None
    return dict(zip(events, totals))


def run_callgrind(args, size, read_rows, write_rows, runs):
    """Each row once under callgrind (--cache-sim=yes), counting only
    bench_counted_region: the hot repeats. Read rows: the traversal; write
    rows: the update traversal at p = 1 and at p = 0 (two processes:
    instruction counts do not vary between processes)."""
    if not shutil.which('valgrind'):
        return [{'error': 'valgrind not installed'}]
    out = []
    reps = 10
    jobs = [(r, 'traversal', None) for r in read_rows] + [(r, 'update', p) for r in write_rows
                                                          if r.name not in runs.unavailable for p in (1, 0)]
    for row, op, p in jobs:
        why = CALLGRIND_CANNOT.get(row.system)
        if why:
            out.append({'row': row.name, 'op': op, 'p': p, 'size': size, 'error': why})
            continue
        suffix = oo_bench_suffix(row.system)
        exe = os.path.join(args.bin_dir, 'oo1', 'oo1' + ('_objects_' + suffix if suffix else ''))
        fam = oo_bench.FAMILY[row.system]
        path = os.path.join(args.store_dir, 'oo1', size, fam + '.db') if fam else ''
        cg = os.path.join(args.out, 'callgrind.%s.%s.%s' % (re.sub(r'[^A-Za-z0-9]+', '_', row.name), op, p))
        cmd = ['valgrind', '--tool=callgrind', '--cache-sim=yes', '--collect-atstart=no',
               '--toggle-collect=bench_counted_region', '--callgrind-out-file=' + cg, exe, 'measure',
               '--system', row.system, '--op', op, '--parts', str(oo_bench.OO1_PARTS[size]), '--warm', '2',
               '--hot', '1', '--slope', '1', '--slope-passes', '1', '--no-pair', '--perf', str(reps),
               '--perf-single', '--address-space-mib', '4096'] + row.extra + (['--path', path] if path else []) + (
                   ['--update-prob', str(p)] if op == 'update' else [])
        t = time.time()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            ok = proc.returncode == 0 and os.path.exists(cg)
            err = '' if ok else 'exit %d: %s' % (proc.returncode, ' | '.join(proc.stderr.strip().splitlines()[-3:]))
        except subprocess.TimeoutExpired:
            ok, err = False, 'timed out'
        ev = parse_callgrind(cg) if ok else None
        rec = {'row': row.name, 'op': op, 'p': p, 'size': size, 'reps': reps, 'seconds': time.time() - t}
        if ev:
            rec['per_run'] = {k: v / reps for k, v in ev.items()}
        else:
            rec['error'] = err or 'no counts'
        out.append(rec)
        log('  callgrind %-32s %-9s p=%s: %s' % (row.name, op, p, 'Ir %.0f per run' % rec['per_run']['Ir']
                                                   if ev else rec['error'][:200]))
        if os.path.exists(cg):
            os.remove(cg)
    return out


# Rows valgrind cannot run (tried: the trap check is a real SIGSEGV whose
# handler decodes the faulting instruction, which under valgrind is not the
# program's; the page engine's userfaultfd / SIGSEGV page faulting dies under
# it with SIGSEGV).
CALLGRIND_CANNOT = {
    'objects-pf': 'not under valgrind (the trap handler decodes the faulting instruction: valgrind runs translated code)',
    'steppe-uffd': 'not under valgrind (the page engine\'s page-fault machinery dies under it)',
    'objects-fb-pages': 'not under valgrind (the heap\'s vm write tracking dies under it)',
}


def oo_bench_suffix(system):
    return {'objects-fb': 'fb', 'objects-id': 'id', 'objects-idsh': 'idsh', 'objects-pf': 'pf',
            'objects-fb-flag': 'fb_flag', 'objects-fb-remset': 'fb_remset', 'objects-fb-pages': 'fb_pages'}.get(system)


# ---- aggregation --------------------------------------------------------------------------------

def by_row(records, op):
    out = {}
    for r in records:
        if r.get('op') == op:
            out.setdefault(r['system'], []).append(r)
    return out


def perf_med(recs, key, field):
    return med([(r.get(key) or {}).get(field) for r in recs])


def hw_note(recs):
    """'' when the hardware counters counted, else the reason given."""
    for r in recs:
        p = r.get('perf') or {}
        if p.get('hardware'):
            return ''
        why = (p.get('unavailable') or {}).get('instructions')
        if why:
            return why
    return 'no --perf data'


# ---- report -------------------------------------------------------------------------------------

def report(args, meta, records, failures, unavailable, callgrind):
    os.makedirs(args.out, exist_ok=True)
    # the cross-system check: traversal answers across the read rows, update
    # answers across the write rows, checkpoint answers and final states
    checked = cross_check(records, failures)
    failures[:] = list(dict.fromkeys(failures))
    for r in records:
        row = next((x for x in WRITE + READ if x.name == r['system']), None)
        bad = row and describe_ok(row, r)
        if bad:
            failures.append('%s %s: %s' % (r['op'], r['system'], bad))
    failures[:] = list(dict.fromkeys(failures))
    rep = Report()
    oo_bench.experiment_header(rep, 'Hosking 1995 on steppe: the read and write barriers on OO1', meta)
    if failures:
        rep.add('## SELF-CHECK FAILURES\n')
        rep.add(*['- **%s**' % f for f in failures])
        rep.add('')
    else:
        rep.add('Self-checks: every system gave the same answers (traversal visits and checksums; update traversal '
                'visits, parts modified and their ids; the state of every part after each system\'s checkpoints; '
                '%d cross-system comparisons); every checkpointed store reopened to the state its process '
                'committed; every run used the card size and write tracking it asked for.\n' % checked)
    for name, why in unavailable.items():
        rep.add('- **%s**: not available on this machine: %s' % (name, why))
    if unavailable:
        rep.add('')
    for size in meta['sizes']:
        recs = [r for r in records if r['size_name'] == size]
        table1(rep, size, recs, callgrind)
        t2 = table2(rep, size, recs, callgrind, unavailable, meta)
        ck = figure1(rep, size, recs, meta, unavailable)
        table3(rep, size, ck, t2, meta)
        log_volume(rep, size, ck, meta)
    plots = plot(args.out, meta, records, unavailable)
    return oo_bench.finish_experiment(args.out, 'hosking-1995', rep, meta['mode'] == 'quick', plots, failures,
                                      {'meta': meta, 'unavailable': unavailable, 'callgrind': callgrind,
                                       'runs': records}, checked)


def cg_get(callgrind, row, op, p, key):
    for c in callgrind:
        if c.get('row') == row and c.get('op') == op and c.get('p') == p and c.get('per_run'):
            return c['per_run'].get(key)
    return None


def cg_error(callgrind, row, op, p):
    for c in callgrind:
        if c.get('row') == row and c.get('op') == op and c.get('p') == p:
            return c.get('error')
    return None


def table1(rep, size, recs, callgrind):
    rows = by_row(recs, 'traversal')
    rep.add('## Table 1: read barrier, OO1 %s traversal (%s parts)\n' % (size, '{:,}'.format(
        oo_bench.OO1_PARTS[size])))
    rep.add('cold = iteration 1 in a fresh process after dropping the OS caches (the operation alone; the open is '
            'apart); warm = median of iterations 2–10; hot = the fitted slope over k repeated traversals (ms per '
            'traversal). Medians over rounds. Ratios: cold / ID lazy cold, warm and hot / non-persistent. Paper: '
            'seconds on a 40 MHz SPARCstation 2.\n')
    np_ = rows.get('non-persistent', [])
    idl = rows.get('ID, lazy', [])

    def pick(rs, what):
        vals = []
        for r in rs:
            s = r['series']
            if what == 'cold':
                vals.append(s['cold_ms'][0])
            elif what == 'warm':
                vals.append(med(s['warm_ms']))
            elif what == 'pair':
                vals.append(oo_bench.pair_ratio(s))
            else:
                vals.append(s.get('hot_slope_ms'))
        return med(vals)

    npw, nph, idc = pick(np_, 'warm'), pick(np_, 'hot'), pick(idl, 'cold')
    pnp = PAPER_T1['non-persistent']
    body = []
    for row in READ:
        p = PAPER_T1.get(row.paper) if row.paper else None
        prat = ['–'] * 3 if not p else [rt(ratio(p[0], PAPER_T1['ID, lazy'][0])), rt(ratio(p[1], pnp[1])),
                                         rt(ratio(p[2], pnp[2]))]
        pcells = ['%s / %s / %s' % (fnum(p[0]), fnum(p[1]), fnum(p[2])) if p else '– (no such row)'] + prat
        if not row.built:
            body.append([row.name, row.why, '–', '–', '–', '–', '–', '–'] + pcells)
            continue
        rs = rows.get(row.name, [])
        c = rep.need('%s T1 %s cold' % (size, row.name), pick(rs, 'cold'))
        w = rep.need('%s T1 %s warm' % (size, row.name), pick(rs, 'warm'))
        h = rep.need('%s T1 %s hot' % (size, row.name), pick(rs, 'hot'))
        pair = pick(rs, 'pair') if row.kind != 'resident' else None
        if row.kind != 'resident':
            rep.need('%s T1 %s same-process' % (size, row.name), pair)
        body.append([row.name, fms(c), fms(w), fms(h), rt(ratio(c, idc)) if row.kind != 'resident' else '–',
                     rt(ratio(w, npw)), rt(ratio(h, nph)), rt(pair) if row.kind != 'resident' else '1.00×'] + pcells)
    rep.table(['steppe row', 'cold (ms)', 'warm (ms)', 'hot (ms)', 'cold / ID lazy', 'warm / non-pers.',
               'hot / non-pers.', 'hot, same-process / non-pers.', 'paper cold / warm / hot (s)',
               'paper cold / ID lazy', 'paper warm / non-pers.', 'paper hot / non-pers.'], body)
    rep.add('hot, same-process = the hot traversal against a transient copy of the database built in the same '
            'process and timed alternately (the hosking-moss harness\'s robust hot figure); hot / non-pers. divides '
            'slopes measured in different processes, which on this shared machine move by ±50 %.\n')

    # counters per hot traversal
    why = hw_note([r for rs in rows.values() for r in rs])
    rep.add('**Per hot traversal: hardware counters, TSC, callgrind** (the --perf repeats of the last warm input: '
            'the fastest of many short passes, median over rounds). Hardware counters: %s. TSC cycles are reference cycles at the TSC\'s constant '
            'rate (user and kernel time), not core cycles. callgrind: instructions executed (exact) and the misses '
            'of its simulated I1 / D1 caches (this host\'s geometry), counting only the hot repeats; the paper\'s '
            'columns are I refs, I misses, R misses, W misses.\n' % (
                'counted' if not why else '**unavailable on this machine** (%s): no instruction or miss counts '
                'from hardware' % why))
    np_ir = cg_get(callgrind, 'non-persistent', 'traversal', None, 'Ir')
    body = []
    for row in READ:
        p = PAPER_T1.get(row.paper) if row.paper else None
        pc = ['%s / %s / %s / %s' % tuple(fnum(x, 7) for x in p[3:]) if p and p[3] else (
            'n/a (not measurable: trap)' if p else '–'), rt(ratio(p[3], pnp[3])) if p and p[3] else '–']
        if not row.built:
            body.append([row.name, row.why, '–', '–', '–', '–', '–'] + pc)
            continue
        rs = rows.get(row.name, [])
        tsc = rep.need('%s T1 %s tsc' % (size, row.name), perf_med(rs, 'perf', 'tsc_cycles'))
        hw = perf_med(rs, 'perf', 'instructions')
        hwc = perf_med(rs, 'perf', 'cache_misses')
        ir = cg_get(callgrind, row.name, 'traversal', None, 'Ir')
        cgc = '–' if not callgrind else (
            '%s / %s / %s / %s' % tuple(fnum(cg_get(callgrind, row.name, 'traversal', None, k), 7)
                                        for k in ('Ir', 'I1mr', 'D1mr', 'D1mw')) if ir else
            'failed: %s' % (cg_error(callgrind, row.name, 'traversal', None) or '?')[:120])
        body.append([row.name, fnum(tsc, 5), fnum(hw, 7) if hw else 'unavailable',
                     fnum(hwc, 6) if hwc else 'unavailable', cgc, rt(ratio(ir, np_ir)),
                     rt(ratio(tsc, perf_med(rows.get('non-persistent', []), 'perf', 'tsc_cycles')))] + pc)
    rep.table(['steppe row', 'TSC cycles', 'hw instructions', 'hw cache misses',
               'callgrind Ir / I1 miss / D1 read miss / D1 write miss' + ('' if callgrind else ' (not run: --full with valgrind)'),
               'Ir / non-pers.', 'TSC / non-pers.', 'paper I refs / I / R / W misses', 'paper I refs / non-pers.'],
              body)


def update_stats(recs, row_name, callgrind):
    """-> dict of per-run figures of the update traversal at p = 1 against p = 0."""
    rs = recs.get(row_name, [])
    if not rs:
        return None
    u = med([r.get('updates_per_run') for r in rs])
    t1, t0 = perf_med(rs, 'perf', 'tsc_cycles'), perf_med(rs, 'perf_p0', 'tsc_cycles')
    diff = med([(r.get('perf') or {}).get('tsc_cycles', 0) - (r.get('perf_p0') or {}).get('tsc_cycles', 0)
                for r in rs if r.get('perf') and r.get('perf_p0')])
    hz = perf_med(rs, 'perf', 'tsc_hz')
    i1 = cg_get(callgrind, row_name, 'update', 1, 'Ir')
    i0 = cg_get(callgrind, row_name, 'update', 0, 'Ir')
    return {'updates': u, 'tsc1': t1, 'tsc0': t0, 'diff': diff, 'hz': hz, 'ir1': i1, 'ir0': i0,
            'hw1': perf_med(rs, 'perf', 'instructions'), 'hw0': perf_med(rs, 'perf_p0', 'instructions'),
            'hot_ms': med([r['series'].get('hot_slope_ms') for r in rs]),
            'perf1_ms': perf_med(rs, 'perf', 'ms'), 'perf0_ms': perf_med(rs, 'perf_p0', 'ms'),
            'warm_ms': med([med(r['series']['warm_ms']) for r in rs]), 'cold_ms': med([r['series']['cold_ms'][0] for r in rs]),
            'describe': rs[0].get('describe', '')}


def table2(rep, size, recs, callgrind, unavailable, meta):
    rows = by_row(recs, 'update')
    rep.add('## Table 2: write barrier, run-time overhead (OO1 %s update traversal, hot, long-running transaction)\n'
            % size)
    st = {row.name: update_stats(rows, row.name, callgrind) for row in WRITE}
    base = st.get('non-persistent')
    hw_why = hw_note([r for rs in rows.values() for r in rs])
    rep.add('Each visit modifies its part (p = 1: 3,280 modified visits per traversal, x and y: 2 updates each); no '
            'commit. Per modified part = the hot traversal at p = 1 / modified visits (TSC reference cycles; '
            'instructions from callgrind). Net per update = ((p = 1) − (p = 0) of the scheme − the same difference '
            'for non-persistent) / 2 per modified visit, where p = 0 is the same traversal and input with no '
            'update, alternated with p = 1 in the same process (%s): it isolates the '
            'barrier from the read barrier and the traversal. Cycles are TSC cycles because the hardware counters '
            'are %s. ns = TSC cycles / TSC rate. Median over rounds. Paper: cycles of a 40 MHz SPARC.\n' % (
                'passes of %d traversals, the fastest of %d passes of each' % tuple(meta['perf_reps'])
                if isinstance(meta.get('perf_reps'), (list, tuple)) else 'the fastest pass of each',
                'counted' if not hw_why else 'unavailable here (%s)' % hw_why))
    body = []
    out = {}
    for row in WRITE:
        pp = PAPER_T2.get(row.paper)
        pcell = ['%s / %s' % (pp[0], pp[1]) if pp else '–', '%s / %s' % (pp[2], pp[3]) if pp else '–']
        if row.name in unavailable:
            body.append([row.name, 'not available here', '–', '–', '–', '–', '–'] + pcell)
            continue
        s = st.get(row.name)
        if not s:
            rep.need('%s T2 %s' % (size, row.name), None)
            body.append([row.name, 'no data', '–', '–', '–', '–', '–'] + pcell)
            continue
        per_part = ratio(s['tsc1'], s['updates'])
        net = None
        if base and s['diff'] is not None and base['diff'] is not None and s['updates']:
            net = (s['diff'] - base['diff']) / (2 * s['updates'])
        ns = net / s['hz'] * 1e9 if net is not None and s['hz'] else None
        ipp = ratio(s['ir1'], s['updates'])
        neti = None
        if base and s['ir1'] is not None and s['ir0'] is not None and base['ir1'] is not None and base['ir0'] is not None:
            neti = ((s['ir1'] - s['ir0']) - (base['ir1'] - base['ir0'])) / (2 * s['updates'])
        rep.need('%s T2 %s per part' % (size, row.name), per_part)
        rep.need('%s T2 %s net' % (size, row.name), net)
        out[row.name] = {'net_cycles': net, 'net_ns': ns, 'hz': s['hz'], 'updates': s['updates'],
                         'per_part': per_part, 'net_instr': neti}
        cgw = cg_error(callgrind, row.name, 'update', 1)
        nocg = 'not run (--full with valgrind)' if not callgrind else (cgw[:60] if cgw else 'failed')
        bpp = ratio(base['tsc1'], base['updates']) if base else None
        pr = '%s' % rt(ratio(pp[0], PAPER_T2['non-persistent'][0])) if pp else '–'
        body.append([row.name, fnum(per_part, 3), rt(ratio(per_part, bpp)), pr,
                     fnum(ipp, 3) if ipp is not None else nocg, fnum(net, 2), fnum(ns, 2),
                     fnum(neti, 3) if neti is not None else nocg,
                     '%s / %s' % (fms(s['perf1_ms']), fms(s['perf0_ms']))] + pcell)
    rep.table(['scheme', 'cycles per modified part (TSC)', 'per part / non-pers.', 'paper per part / non-pers.',
               'instructions per modified part (callgrind)', 'net cycles per update (TSC)', 'net ns per update',
               'net instructions per update (callgrind)', 'hot traversal p = 1 / p = 0 (ms, fastest pass)',
               'paper per part: cycles / instr.', 'paper net: cycles / instr.'], body)
    rep.add('Paper, pages raw (before its cache-anomaly adjustment): %d / %d per part, net %d / %d.\n'
            % PAPER_PAGES_RAW)
    return out


def checkpoint_stats(recs, probs):
    """-> {row: {p: {commit, cpu, traversal, logged, pages, objects, updates}}} (medians over cycles and rounds)"""
    out = {}
    for r in recs:
        if r.get('op') != 'checkpoint':
            continue
        d = out.setdefault(r['system'], {})
        for pp in r['probabilities']:
            x = d.setdefault(pp['p'], {k: [] for k in ('commit_ms', 'commit_cpu_ms', 'traversal_ms', 'bytes_logged',
                                                      'pages_committed', 'objects_written', 'updates', 'write_bytes')})
            for k in x:
                x[k].extend(pp.get(k, []))
    return {row: {p: {k: med(v) for k, v in x.items()} for p, x in d.items()} for row, d in out.items()}


def figure1(rep, size, recs, meta, unavailable):
    probs = meta['probabilities']
    ck = checkpoint_stats(recs, probs)
    rep.add('## Figure 1: checkpoint latency against update probability (OO1 %s)\n' % size)
    rep.add('Every part made resident through the index, one empty commit, then per probability %d × (one update '
            'traversal with a new input, commit). Commit = `commit()`, durable (one fdatasync), wall time; in '
            'brackets the process\'s CPU time during it (leaves out the wait for the disk). Median over cycles and '
            'rounds, ms. Paper: seconds, read off Table 3 where it gives them (pages, cards-4096).\n' % meta['cycles'])
    body = []
    for row in WRITE:
        if row.kind == 'transient':
            continue
        if row.name in unavailable:
            body.append([row.name] + ['not available here'] * len(probs))
            continue
        d = ck.get(row.name, {})
        cells = []
        for p in probs:
            x = d.get(p)
            c = rep.need('%s F1 %s p=%g' % (size, row.name, p), x and x['commit_ms'])
            cells.append('%s (%s)' % (fms(c), fms(x and x['commit_cpu_ms'])))
        body.append([row.name] + cells)
    for name, idx in (('paper: pages', 0), ('paper: cards-4096', 1)):
        body.append([name] + ['%s s' % fnum(PAPER_T3[p][idx]) if p in PAPER_T3 else '–' for p in probs])
    rep.table(['scheme'] + ['p = %g' % p for p in probs], body)
    # the paper's claims about the figure, checked
    rep.add(*figure1_claims(ck, probs))
    rep.add('')
    return ck


def figure1_claims(ck, probs):
    lines = []
    top = max(probs)

    def c(name, p=top, k='commit_ms'):
        return (ck.get(name, {}).get(p) or {}).get(k)

    held = []
    for p in probs:
        cpu_cards = [(n, c('cards-%d' % n, p, k='commit_cpu_ms')) for n in CARDS]
        if p == 0 or not all(v is not None for _, v in cpu_cards):
            continue
        order = [n for n, _ in sorted(cpu_cards, key=lambda x: x[1])]
        held.append('p = %g: %s%s' % (p, ' < '.join(str(n) for n in order), '' if order == sorted(order) else ' (not in order)'))
    if held:
        lines.append('- Paper: "cards ordered by card size". Here, CPU time of the commit, cheapest first: %s.'
                     % '; '.join(held))
    r16, rr = c('cards-16', k='commit_cpu_ms'), c('remsets', k='commit_cpu_ms')
    if r16 is not None and rr is not None:
        lines.append('- Paper: "cards-16 almost as good as remsets". Here at p = %g (CPU): cards-16 %s ms, remsets %s '
                     'ms (%s).' % (top, fms(r16), fms(rr), rt(ratio(r16, rr))))
    logged_whole = [n for n in ck if n.endswith(WHOLE_PAGES % '')]
    schemes = [n for n in ck if n not in logged_whole]
    for k, label in (('commit_ms', 'wall'), ('commit_cpu_ms', 'CPU')):
        pages = {n: c(n, k=k) for n in schemes if n.startswith('pages')}
        others = {n: c(n, k=k) for n in schemes if not n.startswith('pages')}
        if not pages or not others or None in pages.values() or None in others.values():
            continue
        worst = max(others, key=lambda n: others[n])
        lines.append('- Paper: "pages the most expensive". Here at p = %g (%s): pages %s; the most expensive other '
                     'scheme, %s, %s ms.' % (top, label, ', '.join('%s %s ms' % (n.split(', ', 1)[1], fms(v))
                                                                 for n, v in pages.items()), worst,
                                              fms(others[worst])))
    for whole in logged_whole:
        name = whole[:-len(WHOLE_PAGES % '')]
        cells = [(k, c(name, k=k), c(whole, k=k)) for k in ('commit_ms', 'commit_cpu_ms')]
        if all(a is not None and b is not None for _, a, b in cells):
            lines.append('- Sub-page differences, %s at p = %g: wall %s ms against %s ms logging whole pages (%s), '
                         'CPU %s ms against %s ms (%s).' % (name, top, fms(cells[0][1]), fms(cells[0][2]),
                                                           rt(ratio(cells[0][1], cells[0][2])), fms(cells[1][1]),
                                                           fms(cells[1][2]), rt(ratio(cells[1][1], cells[1][2]))))
    return lines


def table3(rep, size, ck, t2, meta):
    probs = meta['probabilities']
    rep.add('## Table 3: break-even of pages against cards-4096 (OO1 %s)\n' % size)
    rep.add('t = (checkpoint_pages − checkpoint_cards-4096) / ((net_cards-4096 − net_pages) per update × 2 × m), '
            'm = parts modified per traversal (modified visits, median); checkpoints = Figure 1\'s wall medians, '
            'nets = Table 2\'s (TSC → seconds by the TSC rate). "pages never loses" when its checkpoint is no dearer; '
            '∞ when pages costs more at both. Paper: the pages scheme against cards-4096 in one system.\n')
    cards = ck.get('cards-4096', {})
    nc = (t2.get('cards-4096') or {}).get('net_ns')
    variants = [r.name for r in WRITE if r.kind == 'pages' and r.name in ck]

    def breakeven(pname, p, key='commit_ms'):
        x, y = (ck.get(pname, {}).get(p) or {}), cards.get(p) or {}
        pc, cc, m = x.get(key), y.get(key), y.get('updates')
        npg = (t2.get(pname) or {}).get('net_ns')
        if pc is None or cc is None or nc is None or npg is None or m is None:
            return None, pc, cc, m
        dcost = pc - cc  # ms per checkpoint pages costs more
        dper = (nc - npg) * 2 * m / 1e6  # ms per traversal pages saves
        if dcost <= 0:
            return ('pages never loses' if dper >= 0 else '≤ %s (then cards wins)' % fnum(-dcost / dper if dper else 0)), pc, cc, m
        if dper <= 0:
            return '∞', pc, cc, m
        return fnum(dcost / dper, 3), pc, cc, m

    main = variants[0] if variants else None
    body = []
    for p in probs:
        pp = PAPER_T3.get(p)
        if main:
            t, pc, cc, m = breakeven(main, p)
            tc, pcc, ccc, _ = breakeven(main, p, 'commit_cpu_ms')
        else:
            t = pc = cc = m = tc = pcc = ccc = None
        body.append(['%g' % p, '%s (%s)' % (fms(pc), fms(pcc)), '%s (%s)' % (fms(cc), fms(ccc)), fnum(m, 4),
                     t if t is not None else '–', tc if tc is not None else '–',
                     fnum(pp[0]) if pp else '–', fnum(pp[1]) if pp else '–', fnum(pp[2]) if pp else '–',
                     ('∞' if pp[3] is None else fnum(pp[3], 4)) if pp else '–'])
    rep.add('Main: **%s** against cards-4096 (the same engine and heap, so the checkpoints differ only by the '
            'barrier). Checkpoints: wall (CPU) ms; t from the wall times and, beside, from the CPU times (which '
            'leave out the fdatasync wait, the same for both and the noisiest part here).\n' % main)
    rep.table(['p', 'checkpoint pages (ms)', 'checkpoint cards-4096 (ms)', 'm', 'break-even t, wall (traversals)',
               't, CPU', 'paper pages (s)', 'paper cards-4096 (s)', 'paper m', 'paper t'], body)
    rep.add('Break-even t for every pages variant (same formula; a page-engine variant\'s net per update is the page '
            'engine\'s own, against the object engine\'s cards-4096):\n')
    body = []
    for v in variants:
        cells = []
        for p in probs:
            t, _, _, _ = breakeven(v, p)
            tc, _, _, _ = breakeven(v, p, 'commit_cpu_ms')
            cells.append('%s / %s' % (t if t is not None else '–', tc if tc is not None else '–'))
        body.append([v, fnum((t2.get(v) or {}).get('net_ns'), 2)] + cells)
    rep.table(['pages variant', 'net ns / update'] + ['t at p = %g (wall / CPU)' % p for p in probs], body)


def log_volume(rep, size, ck, meta):
    probs = meta['probabilities']
    rep.add('## Log volume per checkpoint (OO1 %s)\n' % size)
    rep.add('`stats().bytes_logged` per commit (both engines; log frames and commit records included), median; '
            'in brackets pages committed / objects the commit compared with their committed image (`stats().objects_written` '
            'counts every object the barrier reported: under cards every object of a marked card, under pages '
            'every object of a written page, swizzling\'s writes included). The log holds **sub-page differences** '
            '(docs/format.md, "Diff frames"): a committed page within 2 KiB of its checkpointed version is logged '
            'as its changed 8-byte words, so, as in the paper, every scheme logs object differences and the '
            'volume is about the same for every scheme that finds the same changed pages. The rows "whole pages '
            'logged" are the same checkpoints with `open_options::log_diffs` off: what the differences save.\n')
    body = []
    for row in WRITE:
        for name in (row.name, WHOLE_PAGES % row.name):
            if row.kind == 'transient' or name not in ck:
                continue
            d = ck[name]
            body.append([name] + ['%s (%s / %s)' % (oo_bench.fmt_bytes((d.get(p) or {}).get('bytes_logged')),
                                                    fnum((d.get(p) or {}).get('pages_committed'), 5),
                                                    fnum((d.get(p) or {}).get('objects_written'), 5)
                                                    if ((d.get(p) or {}).get('objects_written') or 0) >= 0 else '–')
                                   for p in probs])
    rep.table(['scheme'] + ['p = %g' % p for p in probs], body)
    saved = []
    for name in WHOLE_PAGE_ROWS:
        d, w = ck.get(name), ck.get(WHOLE_PAGES % name)
        if not d or not w:
            continue
        ratios = ['p = %g: %s' % (p, fnum(d[p]['bytes_logged'] / w[p]['bytes_logged'], 3))
                  for p in probs if (d.get(p) or {}).get('bytes_logged') and (w.get(p) or {}).get('bytes_logged')]
        saved.append('- %s: logged with differences / whole pages = %s.' % (name, ', '.join(ratios)))
    if saved:
        rep.add('\n'.join(saved) + '\n')


# ---- plot ---------------------------------------------------------------------------------------

def plot(out, meta, records, unavailable):
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError as e:
        log('plots skipped: %s' % e)
        return []
    files = []
    for size in meta['sizes']:
        ck = checkpoint_stats([r for r in records if r['size_name'] == size], meta['probabilities'])
        if not ck:
            continue
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
        for ax, key, title in ((axes[0], 'commit_ms', 'wall (durable commit)'),
                               (axes[1], 'commit_cpu_ms', 'process CPU during the commit')):
            for i, row in enumerate(r for r in WRITE if r.name in ck):
                d = ck[row.name]
                ps = [p for p in meta['probabilities'] if d.get(p) and d[p].get(key) is not None]
                style = '-' if row.name.startswith('cards') else ('--' if row.kind == 'pages' else '-.')
                ax.plot([max(p, 0.003) for p in ps], [d[p][key] for p in ps], style, marker='o', ms=3, lw=1.2,
                        color=plt.cm.tab20(i % 20), label=row.name)
            ax.set_xscale('log')
            ax.set_yscale('log')
            ax.set_xlabel('update probability (0 drawn at 0.003)')
            ax.set_ylabel('ms')
            ax.set_title('OO1 %s checkpoint latency: %s' % (size, title))
            ax.grid(alpha=.3)
        axes[1].legend(fontsize=7, ncol=2)
        fig.tight_layout()
        f = os.path.join(out, 'hosking-1995-%s-checkpoint.png' % size)
        fig.savefig(f, dpi=110)
        plt.close(fig)
        files.append(f)
    return files
