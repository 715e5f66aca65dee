"""The report's figures as PNG: the paper's Figure 1, error in time, per-rank timing, and the
learned Omega."""
import math

import numpy as np

from ..atomic import atomic_path
from .collect import Outcome, Sweep, results_file
from .tables import _data_sets, _group, _rows


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(fig, path: str) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    _pyplot().close(fig)


def figure1(sweep: Sweep, path: str) -> None:
    """Mean cumulative error against rounds: one panel per data set, one line per learner
    (the mean curve over seeds)."""
    plt = _pyplot()
    data = _data_sets(sweep)
    cols = min(3, len(data))
    nrows = math.ceil(len(data) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(5.2 * cols, 3.8 * nrows), squeeze=False)
    for ax, d in zip(axes.flat, data):
        low, high = 1.0, 0.0
        for variant, label in _rows(sweep):
            group = _group(sweep, d, variant)
            if not group:
                continue
            curve = np.mean([o.curve for o in group], axis=0)
            # at most ~2000 points per line: the same picture, a PNG a tenth the size
            shown = np.unique(np.linspace(0, len(curve) - 1, 2000).astype(int))
            ax.plot(shown + 1, curve[shown], label=f"{label} ({curve[-1]:.3f})", lw=1.3)
            tail = curve[max(len(curve) // 20, 10) - 1:] if len(curve) > 10 else curve
            low, high = min(low, float(tail.min())), max(high, float(tail.max()))
        ax.set_title(sweep.data[d]["label"])
        ax.set_xlabel("round")
        ax.set_ylabel("mean cumulative error")
        if high > low:
            pad = 0.1 * (high - low)
            ax.set_ylim(max(0.0, low - pad), min(1.0, high + pad))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(data):]:
        ax.set_visible(False)
    fig.suptitle(f"{sweep.name}: mean cumulative error (mean over seeds)")
    fig.tight_layout()
    _save(fig, path)


def timing_figure(outcome: Outcome, path: str) -> None:
    """Seconds each rank spent computing, communicating and waiting over the whole run, and
    the share of the rounds in which each was the last worker the others waited for."""
    plt = _pyplot()
    with results_file(outcome.path, outcome.id) as f:
        seconds = f["timing/seconds"][()].sum(axis=1)           # (P, 3)
        phases = [str(p) for p in f["timing/seconds"].attrs["phases"]]
        roles = [r.decode() if isinstance(r, bytes) else str(r) for r in f["timing/roles"][()]]
        last = f["timing/last_at_barrier"][()] if "last_at_barrier" in f["timing"] else None
        rounds = max(f["timing/seconds"].shape[1], 1)
    if last is not None and last.sum():       # the straggler histogram: whom the others waited for
        roles = [f"{r}, last {100.0 * n / rounds:.0f}%" for r, n in zip(roles, last)]
    fig, ax = plt.subplots(figsize=(7, 0.5 * len(roles) + 2.0))
    left = np.zeros(len(roles))
    for j, phase in enumerate(phases):
        ax.barh(np.arange(len(roles)), seconds[:, j], left=left, label=phase)
        left += seconds[:, j]
    ax.set_yticks(np.arange(len(roles)), [f"{i}: {r}" for i, r in enumerate(roles)], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("seconds over the run")
    ax.set_title(f"{outcome.id}: {outcome.ms_per_round:.3f} ms/round", fontsize=9)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=len(phases), frameon=False)
    fig.tight_layout()
    _save(fig, path)


def error_in_time(f) -> tuple:
    """A results file's error over every instance so far, in the order they were predicted:
    (when, error), both (N,), and the unit of ``when`` (/timing/predicted_at's); None for a
    file without the time of its predictions."""
    if "predicted_at" not in f["timing"]:
        return None
    at = f["timing/predicted_at"]
    started, blocks, unit = at[()], at.attrs["blocks"], str(at.attrs["unit"])
    batch = int(f.attrs["batch"])
    lengths = f["tasks/samples"][()]
    offsets = f["tasks/offsets"][()]
    mistakes = f["metrics/mistakes"][()]
    when = np.empty(int(offsets[-1]))
    for h, (a, b) in enumerate(blocks):
        for k in range(int(a), int(b)):
            when[offsets[k]:offsets[k + 1]] = started[h, np.arange(lengths[k]) // batch]
    order = np.argsort(when, kind="stable")
    error = np.cumsum(mistakes[order], dtype=np.float64) / np.arange(1, order.size + 1)
    return when[order], error, unit


def time_figure(outcomes: list, title: str, path: str) -> bool:
    """The error over all instances so far against instances and against time, one line per
    run (synchronous and asynchronous runs side by side); False if no run has the time of
    its predictions."""
    plt = _pyplot()
    fig, (by_count, by_time) = plt.subplots(1, 2, figsize=(11, 4))
    units = set()
    for o in outcomes:
        with results_file(o.path, o.id) as f:
            timed = error_in_time(f)
        if timed is None:
            continue
        when, error, unit = timed
        units.add(unit.split(" (")[0])
        shown = np.unique(np.linspace(0, len(error) - 1, 2000).astype(int))
        by_count.plot(shown + 1, error[shown], label=o.label, lw=1.2)
        by_time.plot(when[shown], error[shown], label=o.label, lw=1.2)
    if not units:
        _pyplot().close(fig)
        return False
    by_count.set_xlabel("instances predicted")
    by_time.set_xlabel(" / ".join(sorted(units)))
    for ax in (by_count, by_time):
        ax.set_ylabel("error over the instances so far")
        ax.grid(alpha=0.3)
    by_count.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    _save(fig, path)
    return True


def omega_figure(outcome: Outcome, path: str) -> bool:
    """The learned task-relationship matrix as a heat map; False if the run has none."""
    with results_file(outcome.path, outcome.id) as f:
        if "model/omega" not in f:
            return False
        omega = f["model/omega"][()]
    plt = _pyplot()
    K = omega.shape[0]
    size = min(3.5 + 0.28 * K, 12)
    fig, ax = plt.subplots(figsize=(size + 1.2, size))
    bound = float(np.abs(omega).max()) or 1.0
    image = ax.imshow(omega, cmap="RdBu_r", vmin=-bound, vmax=bound)
    names = [n[:18] for n in outcome.task_names]
    font = 8 if K <= 12 else 5
    ax.set_xticks(range(K), names, rotation=90, fontsize=font)
    ax.set_yticks(range(K), names, fontsize=font)
    ax.set_title(f"Omega of {outcome.id}", fontsize=9)
    fig.colorbar(image, ax=ax, shrink=0.8)
    fig.tight_layout()
    _save(fig, path)
    return True
