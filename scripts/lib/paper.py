"""Reproduce the paper's comparison: import the real data sets found locally, run the sweep
scripts/paper.toml, build its report, and (with --docs) write the tables into
docs/results/paper.md (section 'paper') and its figures into docs/figures.

Usage: python scripts/results.py paper [--data DIR] [--config FILE] [--out DIR] [--jobs N]
                                       [--docs | --docs-file FILE] [--figures DIR]

This is what `make paper` runs (about half an hour on 2 cores). Every step is an omtl-mpi
command, printed before it runs:

    omtl-mpi data import landmine|mnist|tweeteval|tudataset DATA/... -o results/data/NAME.h5
    omtl-mpi sweep scripts/paper.toml --out results/paper
    omtl-mpi report results/paper

A real set is imported where the sweep file reads it (its `path`), and only if the sweep file
names it; one whose raw files are not under --data is left out (the sweep marks the real sets
optional). An interrupted run continues where it stopped when run again.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil

from .docsection import SWEEPS, figure_link, invocation, replace_section, stamp
from .paperfigures import SUBSTITUTES, TABLE2, TABLE3, beside, beside_ablation
from .sweeps import (TIE, add_sweep_arguments, finish_sweep_arguments, import_sweep_report,
                     seeds_of, shown_path, table_text, with_config)

EXTRA_FIGURES = ("omega-landmine.c-admm.s0.png", "omega-synthetic.c-admm.s0.png",
                 "timing-synthetic.c-admm.s0.png", "timing-synthetic.d-admm-ring.s0.png")
DEPENDS = SWEEPS + ("scripts/results.py", "scripts/lib/paper.py", "scripts/lib/sweeps.py",
                    "scripts/lib/paperfigures.py")


def _facts(tables: dict) -> list:
    """Plain statements read off the tables: the best learner per data set, and what relationship
    learning changes for each architecture."""
    lines = []
    by_data: dict = {}
    for rec in tables["table2"]:
        by_data.setdefault(rec["data"], []).append(rec)
    for data, recs in by_data.items():
        best = min(recs, key=lambda r: r["mean_error"])
        cadmm = next((r for r in recs if r["learner"] == "C-ADMM"), None)
        text = f"{data}: lowest error {best['mean_error']:.4f} ({best['learner']})"
        if cadmm is not None:
            text += f"; C-ADMM {cadmm['mean_error']:.4f}"
        lines.append(text + ".")
    for rec in tables["table4"]:
        if rec["with_rl"] is None or rec["without_rl"] is None:
            continue
        delta = rec["with_rl"] - rec["without_rl"]
        spread = max(rec["with_rl_std"], rec["without_rl_std"], TIE)
        if abs(delta) <= spread:
            verdict = "changes the error by less than its spread over seeds"
        else:
            verdict = "lowers the error" if delta < 0 else "raises the error"
        alone = rec["independent"]
        lines.append(f"{rec['data']}, {rec['architecture']}: relationship learning {verdict} "
                     f"({rec['without_rl']:.4f} without, {rec['with_rl']:.4f} with"
                     + (f"; each task alone {alone:.4f})" if alone is not None else ")") + ".")
    return lines


def copy_figures(report: str, figures: str, docs_file: str) -> tuple[str, list]:
    """Copy Figure 1 and :data:`EXTRA_FIGURES` (where the report has them) into ``figures``;
    Figure 1's link and the others' Markdown images, as ``docs_file`` links them."""
    os.makedirs(figures, exist_ok=True)
    figure1 = os.path.join(figures, "paper-figure1.png")
    shutil.copyfile(os.path.join(report, "figure1.png"), figure1)
    shown = []
    for name in EXTRA_FIGURES:
        if os.path.exists(os.path.join(report, name)):
            copy = os.path.join(figures, "paper-" + name)
            shutil.copyfile(os.path.join(report, name), copy)
            shown.append(f"![{name[:-4]}]({figure_link(docs_file, copy)})")
    return figure_link(docs_file, figure1), shown


def _header(summary: dict, hours: float, config: str, out: str) -> list:
    """The section's opening paragraphs: stamp, what ran, and what the brackets hold."""
    return [
        stamp(invocation("make paper", ("paper", "--docs")), with_config(DEPENDS, config)) + " It runs "
        f"`omtl-mpi sweep {shown_path(config)} --out {shown_path(out)}` then `omtl-mpi report "
        f"{shown_path(out)}`. {summary['finished']} runs finished ({len(summary['not_done'])} "
        f"failed, {len(summary['missing'])} not run), {hours * 60:.0f} minutes of run time. "
        f"What was scaled down against the paper (ranks, seeds, features), and why, is at the "
        f"top of `{shown_path(config)}`. Every run has the paper's settings (`--preset paper`; "
        "the baselines their own defaults).", "",
        "In brackets beside our figures: the paper's (docs/PAPER.md). Our "
        f"{', '.join(SUBSTITUTES)} features are substitutes for the paper's (docs/DATASETS.md), "
        "so there the paper's figures are for other features; Multi-Lingual is not available "
        "here.", ""]


def write_docs(summary: dict, index: dict, args: argparse.Namespace) -> None:
    """Write the section 'paper' of ``args.docs_file`` and copy its figures."""
    report = summary["out"]
    figure1, shown = copy_figures(report, args.figures, args.docs_file)
    from omtl_mpi.report import load_sweep
    from omtl_mpi.report.tables import metric_table, table3, table4
    sweep = load_sweep(summary["folder"])
    t2, t3, t4 = (metric_table(sweep, "mean_error"),
                  table3(sweep, {k: v.get("target") for k, v in sweep.data.items()}), table4(sweep))
    beside(t2, TABLE2)
    beside(t3, TABLE3)
    beside_ablation(t4)
    runs = [r for r in index["runs"].values() if r["status"] == "done"]
    hours = sum(r["seconds"] for r in runs) / 3600

    def report_table(name):
        return table_text(open(os.path.join(report, name)).read())
    text = [
        *_header(summary, hours, args.config, args.out),
        f"## Table 2: final mean cumulative error (mean ± std over {seeds_of(sweep)})", "",
        table_text(t2.markdown()), "",
        "## Table 2b: balanced error", "", report_table("table2-balanced.md"), "",
        "## Table 2c: F1 of the positive class", "", report_table("table2-f1.md"), "",
        "## Table 3: rounds to the paper's target accuracy, and ms per round", "",
        "The paper's cell is rounds / ms per round on its own machine and layout.", "",
        table_text(t3.markdown()), "",
        "## Table 4: ablation", "", table_text(t4.markdown()), "",
        "## Table 4b: ablation, balanced error", "", report_table("table4-balanced.md"), "",
        "## Table 4c: ablation, F1 of the positive class", "", report_table("table4-f1.md"), "",
        "## Figure 1", "", f"![mean cumulative error against rounds]({figure1})", "",
        f"## Learned Omega and per-rank time (seed 0; every other run's are in "
        f"{shown_path(report)})", "", *shown, "",
        "## Read off the tables", "", *[f"- {line}" for line in _facts(summary["tables"])],
    ]
    replace_section(args.docs_file, "paper", "\n".join(text))
    print(f"updated {args.docs_file} (section 'paper') and {args.figures}/paper-*.png")


def add_arguments(ap: argparse.ArgumentParser) -> None:
    add_sweep_arguments(ap, "paper", "1", "runs side by side (1 keeps ms/round clean)", figures=True)


def main(args: argparse.Namespace) -> None:
    args = finish_sweep_arguments(args, "paper")
    code = import_sweep_report(args.data, args.config, args.out, args.jobs)
    if args.docs_file:
        summary = json.load(open(os.path.join(args.out, "report", "report.json")))
        index = json.load(open(os.path.join(args.out, "index.json")))
        write_docs(summary, index, args)
    raise SystemExit(code)

