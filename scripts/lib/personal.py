"""Personalisation: many short streams in latent groups, the defaults against hashed
personalisation, pooling, the single-task learners, the membership floor and the group oracle.

Draws the personal family (`omtl-mpi data synth --family personal`) at K = 2,000 and
K = 100,000 tasks, and at K = 3,000 with 8 groups, d = 30 and a median of 8 instances, draws
0, 1 and 2, runs scripts/personal.toml on them, computes the membership floor (the true group
centres, each task's group inferred online) and learns the group oracle (one AROW model per
latent group, which knows every task's group), and (with --docs)
writes the section 'personal' of docs/results/personal.md: the mean per-task error, the error
over all instances and the error by stream length of every learner, and whether the defaults
beat hashed personalisation and single-task AROW on every draw by both measures.

Usage: python scripts/results.py personal [--config FILE] [--out DIR] [--jobs N]
                                          [--docs | --docs-file FILE]

`make quality` runs it after the table quality (some 50 runs; of the order of an hour on 2
cores, most of it the K = 100,000 draws). Every step is an omtl-mpi command, printed before it
runs, or the oracle, computed here with the Python API:

    omtl-mpi data synth --family personal --tasks K --seed S -o results/data/personal-K-S.h5
    omtl-mpi sweep scripts/personal.toml --out results/personal
    omtl-mpi report results/personal
"""
from __future__ import annotations

import argparse
import os
import re

import h5py
import numpy as np

from .docsection import SWEEPS, failed_runs, invocation, replace_section, stamp
from .sweeps import (add_sweep_arguments, finish_sweep_arguments, shown_path, sweep_and_report,
                     sweep_files, synth_unless_exists)

DEPENDS = SWEEPS + ("scripts/results.py", "scripts/lib/personal.py", "scripts/lib/sweeps.py",
                    "omtl_mpi/data/personal.py")
# personal-K-S.h5: draw S of the family at K tasks; personal-K-g8-d30-m8-S.h5: with 8 groups,
# d = 30 and a median stream of 8 instances
FILE = re.compile(r"personal-(?P<tasks>\d+)(?:-g(?P<groups>\d+)-d(?P<dims>\d+)"
                  r"-m(?P<median>\d+(?:\.\d+)?))?-(?P<seed>\d+)\.h5$")
DEFAULT = "C-ADMM (defaults)"
DECENTRALISED = "D-ADMM ring, 4 nodes (defaults)"
RIVALS = ("Hashed personalisation (AdaGrad)", "AROW (single task)")
ORACLE = "group oracle (AROW per latent group)"
FLOOR = "membership floor (true centres, each task's group inferred)"


def family(match) -> dict:
    """The family's options that a file name of :data:`FILE` gives (beyond tasks and seed)."""
    if match["groups"] is None:
        return {}
    return {"groups": int(match["groups"]), "dims": int(match["dims"]),
            "length_median": float(match["median"])}


def heading(tasks: int, options: dict) -> str:
    more = (f", {options['groups']} groups, d = {options['dims']}, median "
            f"{options['length_median']:g}" if options else "")
    return f"## K = {tasks:,} tasks{more}"


def draw(wanted: dict) -> None:
    """Draw every personal data file the sweep file names, where it names it, unless it exists."""
    for name, path in wanted.items():
        match = FILE.match(name)
        if match is not None:
            more = family(match)
            synth_unless_exists(path, ["--family", "personal", "--tasks", match["tasks"],
                                       "--seed", match["seed"]]
                                + [f"--{k.replace('_', '-')}={v:g}" for k, v in more.items()])


def oracle(tasks: int, seed: int, **options):
    """Every task's mistakes (list of int8 arrays) of the group oracle on draw ``seed`` of the
    family at ``tasks`` tasks (other options of ``generate_personal`` in ``options``): one
    AROW model per latent group (the learner `arow` of omtl-mpi, intercept included), each
    round predicting every instance of the round before learning from them, as `omtl-mpi run`
    presents the streams (file order)."""
    import omtl_mpi
    from omtl_mpi.data.personal import DEFAULTS, generate_personal, task_groups
    _, X, y = generate_personal(tasks=tasks, seed=seed, **options)
    groups = task_groups(tasks, options.get("groups", DEFAULTS["groups"]), seed)
    G, d = int(groups.max()) + 1, X[0].shape[1]
    lengths = np.array([len(v) for v in y])
    learner = omtl_mpi.learner("arow", n_tasks=G, n_features=d)
    mistakes = [np.zeros(n, np.int8) for n in lengths]
    for t in range(int(lengths.max())):
        active = np.nonzero(lengths > t)[0]
        g = groups[active]
        order = np.argsort(g, kind="stable")
        active, g = active[order], g[order]
        slot = np.arange(len(g)) - np.searchsorted(g, g)          # place within its group
        B = int(slot.max()) + 1
        Xr, yr = np.zeros((G, B, d)), np.zeros((G, B))
        mask = np.zeros((G, B), dtype=bool)
        Xr[g, slot] = [X[k][t] for k in active]
        yr[g, slot] = [y[k][t] for k in active]
        mask[g, slot] = True
        predicted = learner.learn_round(Xr, np.where(mask, yr, 1.0), active=mask)
        for k, gk, s in zip(active, g, slot):
            mistakes[k][t] = predicted[gk, s] != yr[gk, s]
    return mistakes


def mean_floors(draws: dict) -> dict:
    """name -> the mean per-task :func:`membership_floor` of each draw, from name -> (tasks,
    seed, family options) (the experiments' tables print it beside their candidates)."""
    return {name: float(np.mean([m.mean() for m in membership_floor(tasks, seed, **family)]))
            for name, (tasks, seed, family) in draws.items()}


def membership_floor(tasks: int, seed: int, **options):
    """Every task's mistakes (list of int8 arrays) of the membership floor on draw ``seed`` of
    the family at ``tasks`` tasks (other options of ``generate_personal`` in ``options``): the
    generator's own group centres are the models, and each task's group is inferred online by
    Bayes' rule from the task's instances so far, the noise known.

    Given its group g, an instance's label is sign(x . c_g + spread x . z / sqrt(d) + noise e)
    with z and e standard normal, so P(y | x, g) = Phi(y x . c_g / s(x)), s(x)^2 = noise^2 +
    spread^2 |x|^2 / d. Each task starts from the groups' prior (uniform, as drawn), predicts
    the sign of its posterior's P(y = +1 | x) - 1/2 (+1 on a tie) and then multiplies in the
    instance's likelihood. It treats a task's instances as independent given its group and
    never learns the task's own deviation z: a reference for what finding each task's group
    gives, not a lower bound (a learner that also learns z can go below it on long streams).
    It is nearer to what short streams allow than the oracle, which knows the groups and
    learns each group's model from all its tasks."""
    from scipy.special import log_ndtr, ndtr

    from omtl_mpi.data.personal import DEFAULTS, generate_personal, group_centres
    options = {**DEFAULTS, **options, "tasks": tasks}
    _, X, y = generate_personal(**options, seed=seed)
    centres = group_centres(options["groups"], options["dims"], seed)
    G, d = centres.shape
    lengths = np.array([len(v) for v in y])
    log_post = np.full((tasks, G), -np.log(G))
    mistakes = [np.zeros(n, np.int8) for n in lengths]
    for t in range(int(lengths.max())):
        active = np.nonzero(lengths > t)[0]
        x = np.array([X[k][t] for k in active])
        label = np.array([y[k][t] for k in active], dtype=np.float64)
        s = np.sqrt(options["noise"] ** 2 + options["spread"] ** 2 * (x * x).sum(axis=1) / d)
        m = (x @ centres.T) / s[:, None]                          # (active, G)
        post = np.exp(log_post[active] - log_post[active].max(axis=1, keepdims=True))
        p_plus = (post * ndtr(m)).sum(axis=1) / post.sum(axis=1)
        predicted = np.where(p_plus >= 0.5, 1.0, -1.0)
        for i, k in enumerate(active):
            mistakes[k][t] = predicted[i] != label[i]
        log_post[active] += log_ndtr(label[:, None] * m)
    return mistakes


def scores(totals: np.ndarray, lengths: np.ndarray) -> dict:
    """The mean per-task error, the error over all instances and by stream length."""
    from omtl_mpi.metrics import by_length
    return {"mean_error": float((totals / lengths).mean()),
            "overall_error": float(totals.sum() / lengths.sum()),
            "by_length": by_length(totals, lengths)}


def run_scores(path: str) -> dict:
    with h5py.File(path, "r") as f:
        lengths = f["tasks/samples"][()]
        totals = np.rint(f["metrics/per_task_error"][()] * lengths)
    return scores(totals, lengths)


def collect(args) -> dict:
    """{(K, options): {learner: [scores of each draw]}} of the sweep's runs, the membership
    floor and the oracle."""
    from omtl_mpi.report import load_sweep
    sweep = load_sweep(args.out)
    out: dict = {}
    files = sweep_files(args.config)
    for o in sweep.outcomes:
        match = FILE.match(os.path.basename(files.get(f"{o.data}.h5", "")) or "")
        if match is None:
            continue
        kind = (int(match["tasks"]), tuple(family(match).items()))
        out.setdefault(kind, {}).setdefault(o.label, {})[int(match["seed"])] = run_scores(o.path)
    for (tasks, options), by in out.items():
        for seed in sorted({s for runs in by.values() for s in runs}):
            for label, bound in ((FLOOR, membership_floor), (ORACLE, oracle)):
                print(f"{label}: {heading(tasks, dict(options))[3:]}, draw {seed}", flush=True)
                mistakes = bound(tasks, seed, **dict(options))
                by.setdefault(label, {})[seed] = scores(
                    np.array([m.sum() for m in mistakes]), np.array([len(m) for m in mistakes]))
    return {k: {lab: [runs[s] for s in sorted(runs)] for lab, runs in by.items()}
            for k, by in sorted(out.items())}, sweep


def _cell(values: list) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return ""
    return f"{np.mean(values):.4f} ± {np.std(values):.4f}" if len(values) > 1 else f"{values[0]:.4f}"


def table(by: dict) -> list:
    classes = [c["lengths"] for c in next(iter(by.values()))[0]["by_length"]]
    out = ["| learner | draws | mean per-task error | error over all instances | "
           + " | ".join(f"tasks with {c} instances: mean error" for c in classes) + " |",
           "|---|---|---|---|" + "---|" * len(classes)]
    for label, runs in by.items():
        cells = [_cell([r["mean_error"] for r in runs]), _cell([r["overall_error"] for r in runs])]
        cells += [_cell([r["by_length"][i]["mean_error"] for r in runs]) for i in range(len(classes))]
        out.append(f"| {label} | {len(runs)} | " + " | ".join(cells) + " |")
    return out


def verdicts(by: dict) -> list:
    """Whether the defaults beat each rival on every draw, by both measures, and how far they
    are from the oracle against the best rival (computed from the runs)."""
    lines = []
    if DEFAULT not in by:
        return lines
    for name in (DEFAULT, DECENTRALISED):
        ours = by.get(name)
        for rival in RIVALS:
            if ours is None or rival not in by or len(by[rival]) != len(ours):
                continue
            for metric, what in (("mean_error", "mean per-task error"),
                                 ("overall_error", "error over all instances")):
                wins = [a[metric] < b[metric] for a, b in zip(ours, by[rival])]
                lines.append(f"{name} against {rival}, {what}: lower on {sum(wins)} of "
                             f"{len(wins)} draws (" + ", ".join(
                                 f"{a[metric]:.4f} against {b[metric]:.4f}"
                                 for a, b in zip(ours, by[rival])) + ").")
    if FLOOR in by:
        floor = [x["mean_error"] for x in by[FLOOR]]
        for name in (DEFAULT, DECENTRALISED):
            if name in by and len(by[name]) == len(floor):
                ours = [x["mean_error"] for x in by[name]]
                lines.append(f"{name} above the membership floor, mean per-task error: " + ", ".join(
                    f"{a - b:+.4f} ({a:.4f} against {b:.4f})" for a, b in zip(ours, floor)) + ".")
    if ORACLE in by:
        best = min((r for r in RIVALS if r in by),
                   key=lambda r: np.mean([x["mean_error"] for x in by[r]]), default=None)
        if best is not None:
            o, a, b = (np.mean([x["mean_error"] for x in by[k]]) for k in (ORACLE, DEFAULT, best))
            lines.append(f"Mean per-task error over the draws: {DEFAULT} {a:.4f}, {best} {b:.4f}, "
                         f"the group oracle {o:.4f}: the defaults close {100 * (b - a) / (b - o):.0f}% "
                         f"of the gap between {best} and the oracle.")
    return lines


def write_docs(args, results, sweep) -> None:
    text = [stamp(invocation("make quality", ("personal", "--docs")), DEPENDS) + " It runs "
            f"`omtl-mpi sweep {shown_path(args.config)} --out {shown_path(args.out)}` and "
            f"`omtl-mpi report {shown_path(args.out)}`; {len(sweep.outcomes)} runs finished. The "
            "family's draws 0, 1 and 2 at each size (`omtl-mpi data synth --family personal "
            "--tasks K --seed S`: 4 latent groups around unit centres, spread 0.3, label noise "
            "0.5, d = 20, stream lengths log-normal with median 15; where the heading says so, 8 "
            "groups, d = 30 and median 8: `--groups 8 --dims 30 --length-median 8`), each "
            "task's stream in the "
            "file's order, one process (D-ADMM's 4 nodes simulated in it). Each cell is the "
            "mean ± std over the draws. The group oracle knows every task's group and learns "
            "one AROW model per group from all its tasks' instances (scripts/lib/personal.py); no "
            "learner can know the groups, so it is a bound, not a rival. The membership floor is nearer "
            "what short streams allow: the generator's true group centres are its models, and "
            "each task infers its own group online by Bayes' rule from its instances so far, "
            "the noise known; it never learns a task's own deviation from its centre, so a "
            "learner can go below it on long streams (scripts/lib/personal.py). The defaults were chosen on the draws 100, 101 and 102 "
            "(experiments/PROTOCOL.md, step 8), not on these.", "", *failed_runs(sweep)]
    for (tasks, options), by in results.items():
        text += [heading(tasks, dict(options)), "", *table(by), "",
                 *[f"- {line}" for line in verdicts(by)], ""]
    replace_section(args.docs_file, "personal", "\n".join(text))
    print(f"updated {args.docs_file} (section 'personal')")


def add_arguments(ap: argparse.ArgumentParser) -> None:
    add_sweep_arguments(ap, "personal", "2", "runs side by side")


def main(args: argparse.Namespace) -> None:
    args = finish_sweep_arguments(args, "personal")
    draw(sweep_files(args.config))
    code = sweep_and_report(args.config, args.out, args.jobs)
    if args.docs_file:
        results, sweep = collect(args)
        write_docs(args, results, sweep)
    raise SystemExit(code)

