"""Asynchronous rounds (--sync partial) against synchronous ones, with one worker five times slower.

Imports Landmine when found locally, runs scripts/asynchronous.toml one data set at a time,
reports, and (with --docs) writes docs/results/asynchronous.md (section 'asynchronous'): for
every learner, data set and seed the final mean cumulative error of `--sync full` and of
`--sync partial --slow 1:5`, their difference, its mean and largest size over the seeds and
whether every seed's is within 0.005; when the partial runs' workers made their last
predictions on the simulated clock; and the report's error-against-time figures.

Usage: python scripts/results.py asynchronous [--data DIR] [--config FILE] [--out DIR]
                                              [--jobs N] [--docs | --docs-file FILE]
                                              [--figures DIR]

`make asynchronous` runs it (a few minutes on 2 cores: every run is one process). Every step is
an omtl-mpi command, printed before it runs:

    omtl-mpi data import landmine DATA/landmine/LandmineData.mat -o results/data/landmine.h5
    omtl-mpi sweep results/asynchronous/plans/SET.toml --out results/asynchronous/SET
    omtl-mpi report results/asynchronous/SET                      (one sweep per data set SET)

One sweep per data set, because `omtl-mpi sweep` checks every run before it starts any and
refuses the whole file when one run cannot be made: each data set's file (written here from
scripts/asynchronous.toml) holds the file's entries that can run on that set, and the table
lists each one left out with the one line `omtl-mpi run` refuses it with. A pair of entries is
the same learner and topology with and without `sync = "partial"` in its options.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import tomllib

import h5py
import numpy as np

from .docsection import SWEEPS, failed_runs, figure_link, invocation, replace_section, stamp
from .sweeps import (OMTL, add_sweep_arguments, finish_sweep_arguments, import_data, shown_path,
                     step, sweep_files, with_config)

DEPENDS = SWEEPS + ("scripts/results.py", "scripts/lib/asynchronous.py", "scripts/lib/sweeps.py")
WITHIN = 0.005


# ---------------------------------------------------------------- the sweep file, one set at a time
def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {value!r} as TOML")


def _toml(doc: dict) -> str:
    """A sweep document (top-level keys, then tables of tables) as TOML text."""
    lines = [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in doc.items() if not isinstance(v, dict)]
    for table, entries in ((k, v) for k, v in doc.items() if isinstance(v, dict)):
        for key, body in entries.items():
            lines += ["", f"[{table}.{json.dumps(key)}]"]
            lines += [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in body.items()]
    return "\n".join(lines) + "\n"


def split(config: str, folder: str) -> tuple[dict, list]:
    """Write FOLDER/plans/SET.toml for every data set of the sweep file ``config`` that exists
    (or is drawn): the set, with its path made absolute, and every algorithm entry whose runs
    on it `omtl-mpi sweep` accepts. Returns {set: that file} and the refusals, (set, entry,
    the one line the sweep's check gave)."""
    from omtl_mpi.errors import UserError
    from omtl_mpi.sweep.plan import load_plan
    with open(config, "rb") as f:
        doc = tomllib.load(f)
    base = os.path.dirname(os.path.abspath(config))
    top = {k: v for k, v in doc.items() if k not in ("data", "algorithms")}
    plans, refused = {}, []
    os.makedirs(os.path.join(folder, "plans"), exist_ok=True)
    for key, data in doc.get("data", {}).items():
        data = dict(data)
        if isinstance(data.get("path"), str):
            data["path"] = os.path.normpath(os.path.join(base, data["path"]))
            if not os.path.exists(data["path"]):
                print(f"{data['path']} not found: {key} is left out (optional)"
                      if data.get("optional") else f"{data['path']} not found")
                if data.get("optional"):
                    continue
        kept = {}
        for name, entry in doc.get("algorithms", {}).items():
            one = {**top, "data": {key: data}, "algorithms": {name: entry}}
            with tempfile.NamedTemporaryFile("w", suffix=".toml", dir=folder, delete=False) as f:
                f.write(_toml(one))
            try:
                load_plan(f.name)
                kept[name] = entry
            except UserError as exc:
                # the check's line names the temporary file and the entry: keep its reason
                reason = str(exc).split(f"algorithms.{name}: ", 1)[-1]
                refused.append((key, name, reason))
            finally:
                os.unlink(f.name)
        if kept:
            path = os.path.join(folder, "plans", f"{key}.toml")
            with open(path, "w") as f:
                f.write(f"# written by scripts/results.py asynchronous from {shown_path(config)}: "
                        f"the data set {key} and the entries that can run on it\n")
                f.write(_toml({**top, "data": {key: data}, "algorithms": kept}))
            plans[key] = path
    return plans, refused


def run_sweeps(plans: dict, folder: str, jobs: str) -> int:
    """Each data set's sweep into FOLDER/SET and its report; the worst exit code."""
    worst = 0
    for key, plan in plans.items():
        out = os.path.join(folder, key)
        code = step(OMTL + ["sweep", plan, "--out", out, "--jobs", jobs], check=False)
        if code == 130:
            raise SystemExit(code)
        step(OMTL + ["report", out])
        worst = max(worst, code)
    return worst


# ---------------------------------------------------------------- what the runs say
def pairs(config: str) -> list:
    """(synchronous entry, asynchronous entry, label) of the sweep file: an entry with
    ``sync = "partial"`` in its options and the entry of the same learner and topology without."""
    with open(config, "rb") as f:
        entries = tomllib.load(f).get("algorithms", {})

    def shape(e):
        return (e.get("algo"), str(e.get("topology")))

    found = []
    for name, e in entries.items():
        if e.get("options", {}).get("sync") != "partial":
            continue
        ref = next((n for n, r in entries.items() if shape(r) == shape(e)
                    and r.get("options", {}).get("sync", "full") == "full"), None)
        if ref is not None:
            found.append((ref, name))
    return found


def clock(path: str) -> dict | None:
    """When each worker (or node) of a one-process --sync partial run made its last prediction,
    on the simulated clock (/timing/predicted_at: the start of the round in which it predicted
    its last instance), and how many rounds its stream took; None for a run timed in seconds."""
    with h5py.File(path, "r") as f:
        at = f["timing/predicted_at"]
        if not str(at.attrs["unit"]).startswith("simulated"):
            return None
        started, blocks = at[()], at.attrs["blocks"]
        lengths, batch = f["tasks/samples"][()], int(f.attrs["batch"])
    last, pace = [], []
    for h, (a, b) in enumerate(blocks):
        rounds = int(-(-lengths[a:b].max() // batch))
        last.append(float(started[h, rounds - 1]))
        steps = np.diff(started[h, :rounds])
        pace.append(float(steps.min()) if steps.size else 1.0)
    pace = np.array(pace)
    slowed = pace > pace.min()           # every round of these lasted longer than the others' fastest
    if not slowed.any():
        return None
    return {"rounds": int(started.shape[1]), "fast_last": max(t for t, s in zip(last, slowed) if not s),
            "slow_last": max(t for t, s in zip(last, slowed) if s)}


def collect(folder: str, plans: dict):
    """{set: sweep} of the data sets that ran."""
    from omtl_mpi.report import load_sweep
    return {key: load_sweep(os.path.join(folder, key)) for key in plans
            if os.path.exists(os.path.join(folder, key, "index.json"))}


def _labels(config: str) -> tuple[dict, dict, dict]:
    """The data sets' and the entries' labels, and each entry's own --max-delay (or None)."""
    with open(config, "rb") as f:
        doc = tomllib.load(f)
    entries = doc.get("algorithms", {})
    return ({k: v.get("label", k) for k, v in doc.get("data", {}).items()},
            {k: v.get("label", k) for k, v in entries.items()},
            {k: v.get("options", {}).get("max-delay") for k, v in entries.items()})


def _learner(sync_label: str) -> str:
    """'C-ADMM, --sync full' -> 'C-ADMM'; a label without that ending as it is."""
    return sync_label.rsplit(", --sync full", 1)[0]


def tables(config: str, sweeps: dict, refused: list) -> tuple[list, list, list]:
    """Lines of the per-seed table, of the summary table and of the clock table."""
    data_labels, labels, bounds = _labels(config)
    why = {(d, e): r for d, e, r in refused}
    per_seed = ["| data | learner | seed | `--sync full` | `--sync partial --slow 1:5` | "
                "partial - full |", "|---|---|---|---|---|---|"]
    summary = ["| data | learner | seeds | `--sync full` (mean) | `--sync partial --slow 1:5` "
               "(mean) | mean difference | largest difference (by size) | within 0.005 on every seed |",
               "|---|---|---|---|---|---|---|---|"]
    timed = ["| data | learner | seed | rounds | the fast workers' last prediction | the slowed "
             "worker's last prediction | ratio |", "|---|---|---|---|---|---|---|"]
    for key in data_labels:
        sweep = sweeps.get(key)
        for full, part in pairs(config):
            learner = _learner(labels[full])
            if bounds[part] is not None:          # another delay bound than the default's
                learner += f", --max-delay {bounds[part]}"
            runs = {e: {o.seed: o for o in sweep.outcomes if o.algorithm == e} if sweep else {}
                    for e in (full, part)}
            failed = {e: {rid.rpartition(".s")[2]: (status, error) for rid, status, error in
                          (sweep.not_done if sweep else []) if rid.startswith(f"{key}.{e}.")}
                      for e in (full, part)}
            seeds = sorted({s for e in (full, part) for s in runs[e]} |
                           {int(s) for e in (full, part) for s in failed[e] if s.isdigit()})
            if not seeds and not any((key, e) in why for e in (full, part)):
                continue                          # the set is not here (optional, not found)
            diffs = []

            def cell(e, s):
                if (key, e) in why:
                    return "refused"
                if s in runs[e]:
                    return f"{runs[e][s].mean_error:.4f}"
                return failed[e].get(str(s), ("not run",))[0]

            for s in seeds:
                a, b = runs[full].get(s), runs[part].get(s)
                diff = b.mean_error - a.mean_error if a and b else None
                diffs += [] if diff is None else [diff]
                per_seed.append(f"| {data_labels[key]} | {learner} | {s} | {cell(full, s)} | "
                                f"{cell(part, s)} | {'' if diff is None else f'{diff:+.4f}'} |")
                c = clock(b.path) if b else None
                if c:
                    timed.append(f"| {data_labels[key]} | {learner} | {s} | {c['rounds']} | "
                                 f"{c['fast_last']:.0f} | {c['slow_last']:.0f} | "
                                 f"{c['fast_last'] / c['slow_last']:.2f} |")
            if not seeds:                         # refused before any run: one row says why
                seeds_shown = "none"
            else:
                seeds_shown = ", ".join(map(str, seeds))
            mean_of = {e: (f"{np.mean([o.mean_error for o in runs[e].values()]):.4f}"
                           if runs[e] else cell(e, None)) for e in (full, part)}
            if (key, part) in why or (key, full) in why:
                verdict = "refused: " + why.get((key, part), why.get((key, full)))
            elif len(diffs) < len(seeds) or not diffs:
                verdict = f"not known: {len(seeds) - len(diffs)} of the pairs did not finish"
            else:
                verdict = "yes" if max(map(abs, diffs)) <= WITHIN else "**no**"
            summary.append(
                f"| {data_labels[key]} | {learner} | {seeds_shown} | {mean_of[full]} | "
                f"{mean_of[part]} | " + (f"{np.mean(diffs):+.4f} | {max(diffs, key=abs):+.4f}"
                                         if diffs else " | ") + f" | {verdict} |")
    return per_seed, summary, timed


# ---------------------------------------------------------------- the section
def copy_figures(folder: str, sweeps: dict, figures: str, docs_file: str) -> list:
    """Copy each set's report figure time-SET.png to FIGURES/asynchronous-time-SET.png; the
    Markdown lines showing them."""
    shown = []
    for key in sweeps:
        src = os.path.join(folder, key, "report", f"time-{key}.png")
        if not os.path.exists(src):
            continue
        os.makedirs(figures, exist_ok=True)
        copy = os.path.join(figures, f"asynchronous-time-{key}.png")
        shutil.copyfile(src, copy)
        shown.append(f"![error against instances and time, {key}]({figure_link(docs_file, copy)})")
    return shown


def write_docs(args, plans: dict, refused: list) -> None:
    sweeps = collect(args.out, plans)
    per_seed, summary, timed = tables(args.config, sweeps, refused)
    data_labels, labels, _ = _labels(args.config)
    finished = sum(len(s.outcomes) for s in sweeps.values())
    not_done = sum(len(s.not_done) for s in sweeps.values())
    out = shown_path(args.out)
    seeds = ", ".join(str(s) for s in sorted({o.seed for sw in sweeps.values() for o in sw.outcomes},
                                             key=lambda s: s or 0))
    text = [
        stamp(invocation("make asynchronous", ("asynchronous", "--docs")),
              with_config(DEPENDS, args.config)) + " It runs, for every data set SET of "
        f"`{shown_path(args.config)}`, `omtl-mpi sweep {out}/plans/SET.toml --out {out}/SET` and "
        f"`omtl-mpi report {out}/SET` (SET.toml: the set and the entries that can run on it, "
        f"written by the script; `omtl-mpi sweep` refuses a whole file when one of its runs "
        f"cannot be made). {finished} runs finished, {not_done} did not; {len(refused)} "
        f"learner and data set pair{' was' if len(refused) == 1 else 's were'} refused before "
        "running. Every run is one process; "
        "`--sync partial` runs its 4 workers (C-ADMM, `--nodes 4`) or the ring's 4 nodes "
        "(D-ADMM) on the simulated clock, where rank 1 (`--slow 1:5`: C-ADMM's first worker, "
        "D-ADMM's second node) takes 5 units a round and the others 1, so its results are a "
        "function of the seed; `--min-workers` and `--max-delay` are the defaults (half the "
        "workers, 8), but where a learner's name gives another `--max-delay`"
        f". Seeds {seeds} are stream orders (`--seed`). The error is the final "
        "mean cumulative error (the mean over tasks of each task's mistakes over its "
        "instances), as `omtl-mpi report` tabulates it.", "",
        *failed_runs_all(sweeps),
        *([f"Refused before running ({len(refused)}; the line is `omtl-mpi run`'s):", ""]
          + [f"- {data_labels.get(d, d)}, {labels.get(e, e)}: {r}" for d, e, r in refused] + [""]
          if refused else []),
        f"## Within {WITHIN} of synchronous?", "", *summary, "",
        "## Every seed", "", *per_seed, "",
    ]
    if len(timed) > 2:
        text += [
            "## When the workers end (simulated clock)", "",
            "From each `--sync partial` run's `/timing/predicted_at` (simulated units: the start "
            "of the round in which a worker, or node, predicted its last instance; the slowed "
            "one is the worker whose every round lasted longer than the others' fastest). A "
            "synchronous run in one process has no simulated clock (its `/timing` is in seconds, "
            "and it refuses `--slow`); its rounds each wait for the slowest worker, so at this "
            "pace they would end with the slowed worker's. The ratio is the fast workers' last "
            "prediction over the slowed worker's.", "", *timed, ""]
    shown = copy_figures(args.out, sweeps, args.figures, args.docs_file)
    if shown:
        text += ["## Error against instances and against time (seed 1)", "",
                 "`omtl-mpi report`'s `time-SET.png` of each set (its first seed), copied: the "
                 "error over every instance predicted so far against instances (left: the "
                 "asynchronous lines beside the synchronous ones, which is what the tables above "
                 "measure at the end) and against time (right: for the asynchronous runs the "
                 "simulated units, in which the fast workers' instances are predicted before the "
                 "slowed worker's, which the clock table dates). The synchronous runs' time is "
                 "wall-clock seconds of one process, a few seconds, so their lines lie at the "
                 "left edge of the right panel and do not compare there.", "", *shown, ""]
    replace_section(args.docs_file, "asynchronous", "\n".join(text))
    print(f"updated {args.docs_file} (section 'asynchronous')")


def failed_runs_all(sweeps: dict) -> list:
    lines = []
    for sweep in sweeps.values():
        lines += [line for line in failed_runs(sweep) if line.startswith("- ")]
    return ["Runs that did not finish (their cells say so):", "", *lines, ""] if lines else []


def add_arguments(ap: argparse.ArgumentParser) -> None:
    add_sweep_arguments(ap, "asynchronous", "2", "runs side by side", figures=True)


def main(args: argparse.Namespace) -> None:
    args = finish_sweep_arguments(args, "asynchronous")
    import_data(args.data, sweep_files(args.config))
    plans, refused = split(args.config, args.out)
    for d, e, r in refused:
        print(f"refused: {d}, {e}: {r}")
    code = run_sweeps(plans, args.out, args.jobs)
    if args.docs_file:
        write_docs(args, plans, refused)
    raise SystemExit(code or (1 if refused else 0))
