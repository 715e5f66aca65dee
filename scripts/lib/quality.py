"""Learning quality: every learner of the comparison on every local data set and the
known-answer test beds.

Imports the real sets found locally, draws the test beds, runs scripts/quality.toml, and (with
--docs) writes the section 'quality' of docs/results/quality.md: error, balanced error and F1
for every learner on every data set, with the paper's Table 2 figure beside ours where the
paper has one; Table 4's form; the defaults against the best single-task learner on every set
(the evidence for the defaults, with the sets they were chosen on marked); the targets for the
defaults and the criteria on the test beds, each computed from the runs.

Usage: python scripts/results.py quality [--data DIR] [--config FILE] [--out DIR] [--jobs N]
                                         [--docs | --docs-file FILE] [--figures DIR]

This is what `make quality` runs (some 740 runs: of the order of an hour on 2 cores). Every
step is an omtl-mpi command, printed before it runs:

    omtl-mpi data import landmine|mnist|tweeteval|tudataset DATA/... -o results/data/NAME.h5
    omtl-mpi data synth --family identical|clustered|unrelated ... -o results/data/testbed-*.h5
    omtl-mpi sweep scripts/quality.toml --out results/quality
    omtl-mpi report results/quality

Real sets and test beds are made where the sweep file reads them (its `path`), and only those
it names.
"""
from __future__ import annotations

import argparse
import os
import shutil

from .docsection import SWEEPS, failed_runs, figure_link, invocation, replace_section, stamp
from .paperfigures import SUBSTITUTES, TABLE2, TABLE4, beside
from .sweeps import (TIE, add_sweep_arguments, finish_sweep_arguments, import_sweep_report,
                     layout_of, metric_sections, seed_list, shown_path, sweep_files,
                     synth_unless_exists, with_config)

DEPENDS = SWEEPS + ("scripts/results.py", "scripts/lib/quality.py", "scripts/lib/sweeps.py",
                    "scripts/lib/paperfigures.py")
# the test beds of docs/DATASETS.md (file testbed-NAME.h5): the recipe's draw of each family,
# a larger draw, and the recipe's draws at the scale of unit-norm features
TESTBEDS = {
    "identical": ["--family", "identical"],
    "clustered": ["--family", "clustered"],
    "unrelated": ["--family", "unrelated"],
    "clustered-large": ["--family", "clustered", "--tasks", "20", "--samples", "200", "--dims", "100"],
    "identical-normalized": ["--family", "identical", "--normalize"],
    "clustered-normalized": ["--family", "clustered", "--normalize"],
    "unrelated-normalized": ["--family", "unrelated", "--normalize"],
}
# our rows that stand for a row of the paper's tables
PAPER_ROWS = {"C-ADMM (defaults)": "C-ADMM", "C-ADMM (--preset paper)": "C-ADMM",
              "C-ADMM (--preset paper) W/O RL": "C-ADMM W/O RL",
              "D-ADMM ring (defaults)": "D-ADMM ring", "D-ADMM ring (--preset paper)": "D-ADMM ring"}

DEFAULT = "C-ADMM (defaults)"
D_DEFAULT = "D-ADMM ring (defaults)"
POOLED = "Pooled (one model)"
SINGLE = ("AdaGrad (single task)", "AROW (single task)")    # the test beds' references
EVERY_SINGLE = SINGLE + ("PA-I (single task)", "ADMM-Single")
BALANCED = "C-ADMM (defaults) --class-weight balanced"
# the sets the defaults were chosen on (labels of scripts/quality.toml); every other set is
# reported only, never used to choose
SELECTION = ("Synthetic", "Landmine", "identical", "clustered", "unrelated", "Synthetic, unit norm",
             "identical, unit norm", "clustered, unit norm", "unrelated, unit norm")
# the criteria on the test beds, for the default multi-task learners:
# family -> (what it is compared with, the margin it must keep)
CRITERIA = {"identical": ("pooled", 0.01), "unrelated": ("single", 0.01),
            "clustered": ("both", -0.02)}
# the targets for the default C-ADMM (final mean cumulative error), and the other bars it must
# clear: D-ADMM ring within RING_GAP of it, and on Landmine a balanced error of at most
# LANDMINE_BALANCED with --class-weight balanced
TARGETS = {"Landmine": 0.066, "Chem": 0.26, "Synthetic": 0.072, "MNIST": 0.024, "TweetEval": 0.34}
RING_GAP = 0.02
LANDMINE_BALANCED = 0.35
EVIDENCE = "The defaults against the best single-task learner"


def draw_testbeds(wanted: dict) -> None:
    """Draw each test bed of :data:`TESTBEDS` that ``wanted`` (the sweep file's data files)
    names, where it names it, unless that file exists."""
    for name, args in TESTBEDS.items():
        out = wanted.get(f"testbed-{name}.h5")
        if out is not None:
            synth_unless_exists(out, args)


def _by(records: list, metric: str = "mean_error") -> dict:
    """(learner, data) -> (mean, std over seeds) of the records of a report table of ``metric``."""
    return {(r["learner"], r["data"]): (r[metric], r["std"]) for r in records}


def best_single(by: dict, data: str, learners=EVERY_SINGLE):
    """The single-task learner of ``learners`` with the lowest figure on ``data``, or None."""
    here = [s for s in learners if (s, data) in by]
    return min(here, key=lambda s: by[(s, data)][0]) if here else None


def _against(ours: tuple, ref: tuple) -> str:
    """``ours`` minus ``ref`` (means), and whether the gap exceeds the larger spread over seeds."""
    gap = ours[0] - ref[0]
    if abs(gap) <= max(ours[1], ref[1], TIE):
        return f"{gap:+.4f} (within the spread over seeds)"
    return f"{gap:+.4f} ({'lower' if gap < 0 else 'higher'})"


def evidence_table(records: list) -> list:
    """The defaults (C-ADMM and D-ADMM ring) against the best single-task learner on every data
    set, the sets the defaults were chosen on marked: lines of a Markdown table."""
    by = _by(records)
    out = [f"| data set | used to choose the defaults | {DEFAULT} | {D_DEFAULT} | best single-task "
           f"learner (defaults) | {DEFAULT} minus it |", "|---|---|---|---|---|---|"]
    for data in dict.fromkeys(r["data"] for r in records):
        best = best_single(by, data)
        if (DEFAULT, data) not in by or best is None:
            continue
        ours, ring = by[(DEFAULT, data)], by.get((D_DEFAULT, data))
        out.append(f"| {data} | {'yes' if data in SELECTION else 'no'} | {ours[0]:.4f} | "
                   f"{'' if ring is None else f'{ring[0]:.4f}'} | {by[(best, data)][0]:.4f} "
                   f"({best}) | {_against(ours, by[(best, data)])} |")
    return out


def transfer_lines(records: list) -> list:
    """Where the default multi-task learners stand on each test bed against pooling and the best
    single-task learner, and whether the criterion holds (computed, never typed in)."""
    by = {key: mean for key, (mean, _) in _by(records).items()}
    lines = []
    for family, (against, margin) in CRITERIA.items():
        for learner in (DEFAULT, D_DEFAULT):
            line = _transfer_line(by, learner, family, against, margin)
            if line:
                lines.append(line)
    return lines


def _transfer_line(by, learner, family, against, margin):
    if (learner, family) not in by:
        return None
    ours, pooled = by[(learner, family)], by.get((POOLED, family))
    singles = {s: by[(s, family)] for s in SINGLE if (s, family) in by}
    best = min(singles, key=singles.get) if singles else None
    refs = {"pooled": [pooled], "single": [singles.get(best)],
            "both": [pooled, singles.get(best)]}[against]
    if None in refs:
        return None
    bound = min(refs) + margin
    return (f"{family}: {learner} {ours:.4f}; pooled {pooled:.4f}; best single-task "
            f"{singles[best]:.4f} ({best}); the criterion asks at most {bound:.4f}: "
            + ("met." if ours <= bound else f"missed by {ours - bound:.4f}."))


def criteria_text() -> str:
    """The test beds' criteria in words, from :data:`CRITERIA`."""
    words = {"pooled": "pooling's error", "single": "the best single-task learner's "
             f"({', '.join(s.split(' (')[0] for s in SINGLE)})", "both": "both"}
    parts = [f"{family} tasks, at most {words[against]} + {margin}" if margin >= 0 else
             f"{family} tasks, at least {-margin} below {words[against]}"
             for family, (against, margin) in CRITERIA.items()]
    return "The criterion, per family: " + "; ".join(parts) + "."


def target_lines(err_records: list, bal_records: list) -> list:
    """The targets for the defaults on the real sets and the synthetic family, from the runs."""
    by = {key: mean for key, (mean, _) in _by(err_records).items()}
    bal = {key: mean for key, (mean, _) in _by(bal_records, "balanced_error").items()}
    lines = []
    for data, target in TARGETS.items():
        if (DEFAULT, data) not in by:
            continue
        ours, d = by[(DEFAULT, data)], by.get((D_DEFAULT, data))
        parts = [f"{data}: {DEFAULT} {ours:.4f}, target {target}: "
                 + ("met" if ours <= target else f"missed by {ours - target:.4f}")]
        if d is not None:
            gap = (d - ours) / ours
            parts.append(f"{D_DEFAULT} {d:.4f}, {100 * gap:+.1f}% of C-ADMM's: "
                         + (f"within {RING_GAP:.0%}" if abs(gap) <= RING_GAP else
                            f"not within {RING_GAP:.0%}"))
        if data == "Landmine" and (BALANCED, data) in bal:
            b = bal[(BALANCED, data)]
            parts.append(f"balanced error with --class-weight balanced {b:.4f}, target "
                         f"{LANDMINE_BALANCED}: " + ("met" if b <= LANDMINE_BALANCED else "missed"))
        lines.append("; ".join(parts) + ".")
    return lines


# Table 4's form: the settings whose independent / W/O RL / RL runs are in this sweep
ABLATION = [("`--preset paper`", "ADMM-Single (--preset paper)", "C-ADMM (--preset paper) W/O RL",
             "C-ADMM (--preset paper)"),
            ("defaults", "ADMM-Single", "C-ADMM (defaults)", "C-ADMM (defaults) + RL"),
            ("public code's settings", None, "C-ADMM (public code's settings) W/O RL",
             "C-ADMM (public code's settings)")]


def ablation_table(records: list, metric: str = "mean_error") -> list:
    """Table 4 (C-ADMM: independent, W/O RL, RL) for each setting, by ``metric`` (a key of the
    records); for the error, the paper's figure beside ours."""
    by = {(r["learner"], r["data"]): r[metric] for r in records}
    datas = list(dict.fromkeys(r["data"] for r in records))
    out = ["| data set | settings | independent | W/O RL | RL |", "|---|---|---|---|---|"]
    for data in datas:
        paper = TABLE4.get(data, {}).get("C-ADMM") if metric == "mean_error" else None
        for label, *learners in ABLATION:
            cells = []
            for i, learner in enumerate(learners):
                v = by.get((learner, data)) if learner else None
                cell = f"{v:.4f}" if v is not None else "-"
                if paper:
                    cell += f" (paper {paper[i]:.3f})"
                cells.append(cell)
            if any(c[0] != "-" for c in cells):
                out.append(f"| {data} | {label} | " + " | ".join(cells) + " |")
    return out


def _header(sweep, args) -> list:
    return [
        stamp(invocation("make quality", ("quality", "--docs")), with_config(DEPENDS, args.config))
        + " It runs "
        f"`omtl-mpi sweep {shown_path(args.config)} --out {shown_path(args.out)}` and "
        f"`omtl-mpi report {shown_path(args.out)}`. {len(sweep.outcomes)} runs finished, "
        f"{len(sweep.not_done)} failed, {len(sweep.missing)} not run. Seeds {seed_list(sweep)} "
        f"(stream orders); {layout_of(sweep)}. The test beds are one draw of each family "
        "(docs/DATASETS.md, *Known-answer test beds*). Beside our figure, in brackets: the "
        "paper's Table 2 (Table 4 for W/O RL) where it has one; "
        f"{', '.join(SUBSTITUTES)} use substitute features (docs/DATASETS.md), so their paper "
        "figures are for other features.", ""]


def _ablation_sections(records, bal, f1) -> list:
    return [
        "## Table 4 in the paper's form: C-ADMM alone per task, without and with relationship "
        "learning", "",
        "Independent is ADMM-Single with the same settings (the public code's settings have no "
        "such run here); the paper's Table 4 figure (C-ADMM) in brackets.", "",
        *ablation_table(records), "",
        "The same by balanced error:", "", *ablation_table(list(bal.records), "balanced_error"), "",
        "And by F1 of the positive class:", "", *ablation_table(list(f1.records), "f1"), ""]


def _defaults_sections(records, bal) -> list:
    targets = ", ".join(f"{data} {target}" for data, target in TARGETS.items())
    return [
        f"## {EVIDENCE}", "",
        "Final mean cumulative error of the default multi-task learners and of the best "
        f"single-task learner ({', '.join(s.split(' (')[0] for s in EVERY_SINGLE)}, each with "
        "its defaults) on every data set. *used to choose the defaults*: yes for the sets the "
        "defaults were chosen on; the others are reported only. The last column is the default "
        "C-ADMM's error "
        "minus the best single-task learner's: lower or higher where the gap exceeds the larger "
        "of the two spreads over seeds.", "",
        *evidence_table(records), "",
        "## Targets for the defaults", "",
        f"Each target is a final mean cumulative error that {DEFAULT} must not exceed ({targets}); "
        f"besides, {D_DEFAULT} should be within {RING_GAP:.0%} of it, and on Landmine "
        f"`--class-weight balanced` at most {LANDMINE_BALANCED} balanced error.", "",
        *[f"- {line}" for line in target_lines(records, list(bal.records))], "",
        "## The test beds: where the default multi-task learners stand", "",
        criteria_text(), "",
        *[f"- {line}" for line in transfer_lines(records)], ""]


def write_docs(args) -> None:
    """Write the section 'quality' of ``args.docs_file`` from the sweep in ``args.out``."""
    from omtl_mpi.report import load_sweep
    from omtl_mpi.report.tables import metric_table
    sweep = load_sweep(args.out)
    err, bal, f1 = (metric_table(sweep, m) for m in ("mean_error", "balanced_error", "f1"))
    records = list(err.records)
    beside(err, TABLE2, PAPER_ROWS)
    text = [*_header(sweep, args), *failed_runs(sweep), *metric_sections(sweep, err, bal, f1),
            *_ablation_sections(records, bal, f1), *_defaults_sections(records, bal),
            *_omega_figure(args)]
    replace_section(args.docs_file, "quality", "\n".join(text))
    print(f"updated {args.docs_file} (section 'quality')")


def _omega_figure(args) -> list:
    """The Omega C-ADMM learned on the clustered test bed (seed 0), copied next to the docs: the
    paper's model learns it (the defaults keep Omega = I/K, docs/GUIDE.md, *The defaults*)."""
    src = os.path.join(args.out, "report", "omega-clustered.c-admm-paper.s0.png")
    if not os.path.exists(src):
        return []
    os.makedirs(args.figures, exist_ok=True)
    copy = os.path.join(args.figures, "quality-omega-clustered.png")
    shutil.copyfile(src, copy)
    return ["## Omega learned on the clustered test bed (C-ADMM --preset paper, seed 0)", "",
            "Tasks 0-4 and 5-9 are the two clusters, around +w and -w. The defaults keep Omega "
            "= I/K and share through the experts' related models instead (docs/GUIDE.md, *The "
            "defaults*).", "",
            f"![Omega on the clustered test bed]({figure_link(args.docs_file, copy)})"]


def add_arguments(ap: argparse.ArgumentParser) -> None:
    add_sweep_arguments(ap, "quality", "2", "runs side by side", figures=True)


def main(args: argparse.Namespace) -> None:
    args = finish_sweep_arguments(args, "quality")
    draw_testbeds(sweep_files(args.config))
    code = import_sweep_report(args.data, args.config, args.out, args.jobs)
    if args.docs_file:
        write_docs(args)
    raise SystemExit(code)

