"""oo_plots.py — PNG plots of an OO1/OO7 run (matplotlib, Agg backend).

Per benchmark and size:
  <bench>-<size>-times.png   cold / warm / hot medians per system, one panel per operation (log scale)
  <bench>-<size>-ratio.png   warm and hot time as a multiple of transient, per system (log scale)
"""
import math
import os

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402

PHASE_COLORS = {'cold': '#4c72b0', 'warm': '#dd8452', 'hot': '#55a868'}


def _med(x, phase):
    v = x.get(phase) if x else None
    return v['median'] if v else None


def plot_times(bench, size, ops, out, short, order):
    names = [o for o in bench.ops if o in ops]
    systems = [s for s in order if any(s in ops[o] for o in names)]
    cols = 3 if len(names) > 4 else 2
    rows = math.ceil(len(names) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.4 * rows), squeeze=False)
    for i, op in enumerate(names):
        ax = axes[i // cols][i % cols]
        width = 0.27
        for j, phase in enumerate(('cold', 'warm', 'hot')):
            xs, ys = [], []
            for k, s in enumerate(systems):
                v = _med(ops[op].get(s), phase)
                if v and v > 0:
                    xs.append(k + (j - 1) * width)
                    ys.append(v)
            ax.bar(xs, ys, width, label=phase, color=PHASE_COLORS[phase])
        ax.set_yscale('log')
        ax.set_title(bench.labels[op], fontsize=9)
        ax.set_xticks(range(len(systems)))
        ax.set_xticklabels([short[s] for s in systems], rotation=35, ha='right', fontsize=7)
        ax.set_ylabel('ms (median)', fontsize=8)
        ax.tick_params(axis='y', labelsize=7)
        ax.grid(axis='y', alpha=.3)
        if i == 0:
            ax.legend(fontsize=7)
    for i in range(len(names), rows * cols):
        axes[i // cols][i % cols].axis('off')
    fig.suptitle('%s %s: cold / warm / hot' % (bench.name.upper(), size))
    fig.tight_layout()
    path = os.path.join(out, '%s-%s-times.png' % (bench.name, size))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _ratio(ops, op, s, phase):
    t, x = ops[op]['transient'], ops[op].get(s)
    if not x:
        return None
    if phase == 'warm':
        w, tw = _med(x, 'warm'), _med(t, 'warm')
        return w / tw if w and tw else None
    h = _med(x, 'hot_pair_ratio')
    if h is None:
        hs, ts = _med(x, 'hot_slope'), _med(t, 'hot_slope')
        h = hs / ts if hs and ts and ts > 0 else None
    return h


def plot_ratio(bench, size, ops, out, short, order):
    names = [o for o in bench.ops if o in ops and 'transient' in ops[o]]
    systems = [s for s in order if s != 'transient' and any(s in ops[o] for o in names)]
    cats = [(op, ph) for op in names for ph in ('warm', 'hot')
            if any(_ratio(ops, op, s, ph) for s in systems)]
    if not cats or not systems:
        return None
    fig, ax = plt.subplots(figsize=(min(16, max(7, 0.75 * len(cats) + 2)), 4.2))
    width = 0.8 / len(systems)
    cmap = plt.get_cmap('tab10')
    for k, s in enumerate(systems):
        xs, ys = [], []
        for i, (op, ph) in enumerate(cats):
            r = _ratio(ops, op, s, ph)
            if r:
                xs.append(i + (k - len(systems) / 2 + .5) * width)
                ys.append(r)
        ax.bar(xs, ys, width, label=short[s], color=cmap(k))
    ax.axhline(1.0, color='black', lw=.8)
    ax.set_yscale('log')
    ax.set_xticks(range(len(cats)))
    ax.set_xticklabels(['%s\n%s' % c for c in cats], fontsize=7)
    ax.set_ylabel('x transient (median)', fontsize=8)
    ax.grid(axis='y', alpha=.3)
    ax.legend(fontsize=7, ncol=3)
    ax.set_title('%s %s: time as a multiple of transient (warm; hot = same-process ratio)' % (
        bench.name.upper(), size), fontsize=10)
    fig.tight_layout()
    path = os.path.join(out, '%s-%s-ratio.png' % (bench.name, size))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_all(summaries, benches, out, short, order):
    paths = []
    for b in benches:
        for size, ops in summaries.get(b.name, {}).items():
            paths.append(plot_times(b, size, ops, out, short, order))
            p = plot_ratio(b, size, ops, out, short, order)
            if p:
                paths.append(p)
    return paths
