"""``omtl-mpi report DIR``: the paper's tables and figures from a sweep folder.

Writes into ``DIR/report`` (or ``out``)::

    report.md               every table and figure, with the runs that did not finish
    table2.md/.csv          final mean cumulative error, learners x data sets
    table2-overall.md/.csv  error over all instances (each task weighs by its instances)
    table2-balanced.md/.csv balanced error, the same layout
    table2-f1.md/.csv       F1 of the positive class, the same layout
    table3.md/.csv          rounds to the target accuracy and ms per round
    table4.md/.csv          ablation: independent / without / with relationship learning
    table4-overall.md/.csv, table4-balanced.md/.csv, table4-f1.md/.csv: the same by
                            error over all instances, by balanced error and by F1
    runs.csv                one row per finished run
    figure1.png             mean cumulative error against rounds, a panel per data set
    time-DATA.png           error over all instances so far against instances and against
                            time (seconds, or --sync partial's simulated units), first seeds
    timing-ID.png           per-rank compute / communication / wait of chosen runs
    omega-ID.png            the learned Omega of chosen runs, with task names
    report.json             all of the above as numbers and paths, for scripts
"""
import fnmatch
import json
import os

from ..atomic import atomic_path
from ..paths import make_folder, refuse_special
from .collect import Sweep, load_sweep
from .figures import figure1, omega_figure, time_figure, timing_figure
from .tables import ablation_learners, metric_table, runs_table, table3, table4

__all__ = ["build_report", "load_sweep"]


def _write(path: str, text: str) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(text)


def _first_seed(sweep: Sweep) -> dict:
    """variant -> data -> the outcome with the smallest seed."""
    chosen: dict = {}
    for o in sweep.outcomes:
        slot = chosen.setdefault((o.data, o.variant), o)
        if (o.seed or 0) < (slot.seed or 0):
            chosen[(o.data, o.variant)] = o
    return chosen


def _select(sweep: Sweep, patterns, default) -> list:
    if patterns:
        return [o for o in sweep.outcomes if any(fnmatch.fnmatchcase(o.id, p) for p in patterns)]
    return default


def build_report(folder: str, out: str | None = None, *, timing=(), omega=(), targets=None) -> dict:
    """Build every table and figure of the sweep in ``folder``; return what was written.

    Parameters
    ----------
    timing, omega : sequence of str
        Run-id patterns (``fnmatch``, e.g. ``"synthetic.*.s0"``) whose timing / Omega figures
        to draw. Default timing: the first data set's multi-rank runs, first seed; default
        Omega: every data set's c-admm and d-admm runs with relationship learning, first seed.
    targets : dict, optional
        Data-set key -> target accuracy of Table 3, overriding the sweep file's ``target``.
    """
    sweep = load_sweep(folder)
    out = out or os.path.join(folder, "report")
    make_folder(out, "-o/--out")
    goals = {k: v.get("target") for k, v in sweep.data.items()}
    goals.update(targets or {})
    metrics = ("mean_error", "overall_error", "balanced_error", "f1")
    tables = [*(metric_table(sweep, m) for m in metrics), table3(sweep, goals),
              *(table4(sweep, m) for m in metrics), runs_table(sweep)]
    first = _first_seed(sweep)
    data_order = list(sweep.data)
    first_data = next((d for d in data_order if any(o.data == d for o in sweep.outcomes)), None)
    timed = _select(sweep, timing, [o for (d, _), o in first.items() if d == first_data and o.ranks > 1])
    learns = ablation_learners("relationship")
    default_omega = [o for o in first.values() if o.algo in learns and o.relationship]
    omegas = _select(sweep, omega, default_omega)
    texts = [(f"{t.name}.{ext}", t) for t in tables for ext in ("md", "csv")
             if not (t.name == "runs" and ext == "md")]
    # every file the report writes, checked before the first is written (a FIFO or a device
    # among them would block the report, or be replaced, half-way)
    timelines = {d: [o for (dd, _), o in first.items() if dd == d] for d in data_order}
    timelines = {d: runs for d, runs in timelines.items() if runs}
    for name in [n for n, _ in texts] + ["figure1.png", "report.md", "report.json"] + \
            [f"time-{d}.png" for d in timelines] + \
            [f"timing-{o.id}.png" for o in timed] + [f"omega-{o.id}.png" for o in omegas]:
        refuse_special(os.path.join(out, name), "-o/--out")
    written = {}
    for name, t in texts:
        path = os.path.join(out, name)
        _write(path, t.markdown() if name.endswith(".md") else t.csv())
        written[name] = path
    figures = []
    if sweep.outcomes:
        path = os.path.join(out, "figure1.png")
        figure1(sweep, path)
        figures.append(("Figure 1: mean cumulative error against rounds", path))
    for d, runs in timelines.items():
        path = os.path.join(out, f"time-{d}.png")
        if time_figure(runs, f"{sweep.data[d]['label']}: error against instances and time "
                             "(first seed)", path):
            figures.append((f"error in time, {d}", path))
    for o in timed:
        path = os.path.join(out, f"timing-{o.id}.png")
        timing_figure(o, path)
        figures.append((f"per-rank time of {o.id}", path))
    for o in omegas:
        path = os.path.join(out, f"omega-{o.id}.png")
        if omega_figure(o, path):
            figures.append((f"learned Omega of {o.id}", path))
    md = [f"# Report of sweep `{sweep.name}`", "",
          f"From `{os.path.abspath(folder)}`: {len(sweep.outcomes)} finished runs, "
          f"{len(sweep.not_done)} failed or timed out, {len(sweep.missing)} not run yet.", ""]
    for t in tables[:len(metrics) + 1]:        # Table 2 for each metric, Table 3
        md += [t.markdown(), f"(CSV: `{t.name}.csv`)", ""]
    md += ["### Figures", ""] + [f"![{title}]({os.path.basename(p)})" for title, p in figures] + [""]
    if sweep.not_done or sweep.missing:
        md += ["### Runs without results", "", "| run | status | error |", "|---|---|---|"]
        md += [f"| {rid} | {status} | {(err or '').replace('|', '/')} |" for rid, status, err in sweep.not_done]
        md += [f"| {rid} | not run | |" for rid in sweep.missing]
        md.append("")
    md += ["Every finished run is listed in `runs.csv`."]
    path = os.path.join(out, "report.md")
    _write(path, "\n".join(md) + "\n")
    summary = {"sweep": sweep.name, "folder": os.path.abspath(folder), "out": os.path.abspath(out),
               "finished": len(sweep.outcomes), "not_done": [list(x) for x in sweep.not_done],
               "missing": sweep.missing, "report": path,
               "tables": {t.name: t.records for t in tables},
               "figures": [p for _, p in figures], "files": written}
    _write(os.path.join(out, "report.json"), json.dumps(summary, indent=1))
    return summary
