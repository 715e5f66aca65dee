#!/usr/bin/env python
"""Reproduce the paper's comparison: import the real data sets found locally, run the sweep
scripts/paper.toml, build its report, and (with --docs) write the tables into docs/RESULTS.md.

Usage: python scripts/paper.py [--shared ../shared/data] [--out results/paper] [--docs]

This is what `make paper` runs. Every step is an omtl-mpi command, printed before it runs:

    omtl-mpi data import landmine|mnist|tweeteval|tudataset ... -o results/data/NAME.h5
    omtl-mpi sweep scripts/paper.toml --out results/paper
    omtl-mpi report results/paper

A data set whose files are not under --shared is skipped (the sweep marks the real sets
optional); an interrupted run continues where it stopped when run again.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
from datetime import datetime, timezone

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from docsection import replace_section  # noqa: E402
from paperfigures import SUBSTITUTES, TABLE2, TABLE3, beside, beside_ablation  # noqa: E402

OMTL = [sys.executable, "-m", "omtl_mpi"]
# data set -> (files under --shared that must exist, import arguments)
IMPORTS = {
    "landmine": ("landmine/LandmineData.mat", ["landmine", "{src}"]),
    "mnist": ("mnist/mnist_restored.npz", ["mnist", "{src}", "--dims", "512"]),
    "tweeteval": ("tweeteval", ["tweeteval", "{src}"]),
    "chem": ("chem/tudataset", ["tudataset", "{src}"]),
}
# report figures copied next to the docs (the rest stay in results/paper/report)
EXTRA_FIGURES = ("omega-landmine.c-admm.s0.png", "omega-synthetic.c-admm.s0.png",
                 "timing-synthetic.c-admm.s0.png", "timing-synthetic.d-admm-ring.s0.png")


def step(cmd: list, check: bool = True) -> int:
    shown = ["omtl-mpi"] + cmd[len(OMTL):] if cmd[:len(OMTL)] == OMTL else cmd
    print("$ " + " ".join(shown), flush=True)
    code = subprocess.run(cmd, cwd=ROOT).returncode
    if check and code != 0:
        raise SystemExit(code)
    return code


def import_data(shared: str, folder: str) -> None:
    os.makedirs(folder, exist_ok=True)
    for name, (rel, args) in IMPORTS.items():
        src, out = os.path.join(shared, rel), os.path.join(folder, f"{name}.h5")
        if os.path.exists(out):
            print(f"{out} exists; not imported again (delete it to re-import)")
        elif not os.path.exists(src):
            print(f"{src} not found: {name} is left out of the sweep")
        else:
            step(OMTL + ["data", "import"] + [a.format(src=src) for a in args] + ["-o", out])


def sweep_arguments(doc: str, name: str, jobs: str, jobs_help: str) -> argparse.Namespace:
    """The command line shared by the sweep scripts: --shared, --out, --jobs, --docs."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--shared", default=os.environ.get("DATA", os.path.join(os.path.dirname(ROOT), "shared", "data")),
                    help="folder with the raw data sets (default ../shared/data, or $DATA)")
    ap.add_argument("--out", default=os.path.join(ROOT, "results", name))
    ap.add_argument("--jobs", default=jobs, help=jobs_help)
    ap.add_argument("--docs", action="store_true", help="write the tables into docs/RESULTS.md")
    return ap.parse_args()


def import_sweep_report(shared: str, sweep_file: str, out: str, jobs: str) -> int:
    """Import the local real sets into results/data (where the sweep files read them), run the
    sweep scripts/SWEEP_FILE into ``out`` and build its report; the sweep's exit code."""
    import_data(shared, os.path.join(ROOT, "results", "data"))
    return sweep_and_report(sweep_file, out, jobs)


def sweep_and_report(sweep_file: str, out: str, jobs: str) -> int:
    """Run the sweep scripts/SWEEP_FILE into ``out`` and build its report; the sweep's exit code."""
    code = step(OMTL + ["sweep", os.path.join(ROOT, "scripts", sweep_file), "--out", out,
                        "--jobs", jobs], check=False)
    if code == 130:                     # interrupted: no report of half a sweep
        raise SystemExit(code)
    step(OMTL + ["report", out])
    return code


def _machine() -> str:
    return f"{platform.node() or 'unknown host'}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"


def _table(md: str) -> str:
    """A report table without its '###' title line."""
    return "\n".join(line for line in md.splitlines() if not line.startswith("### ")).strip()


def metric_sections(err, bal, f1) -> list:
    """Lines of a generated section: the error, balanced error and F1 tables (report tables of
    the same runs), each under its heading."""
    return ["### Final mean cumulative error (mean ± std over 3 seeds)", "", _table(err.markdown()),
            "", "### Balanced error", "", _table(bal.markdown()), "",
            "### F1 of the positive class", "", _table(f1.markdown()), ""]


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
        spread = max(rec["with_rl_std"], rec["without_rl_std"])
        if abs(delta) <= spread:
            verdict = "changes the error by less than its spread over seeds"
        else:
            verdict = "lowers the error" if delta < 0 else "raises the error"
        alone = rec["independent"]
        lines.append(f"{rec['data']}, {rec['architecture']}: relationship learning {verdict} "
                     f"({rec['without_rl']:.4f} without, {rec['with_rl']:.4f} with"
                     + (f"; each task alone {alone:.4f})" if alone is not None else ")") + ".")
    return lines


def write_docs(summary: dict, index: dict, docs: str) -> None:
    report = summary["out"]
    figures = os.path.join(ROOT, "docs", "figures")
    os.makedirs(figures, exist_ok=True)
    shutil.copyfile(os.path.join(report, "figure1.png"), os.path.join(figures, "paper-figure1.png"))
    shown = []
    for name in EXTRA_FIGURES:
        if os.path.exists(os.path.join(report, name)):
            shutil.copyfile(os.path.join(report, name), os.path.join(figures, "paper-" + name))
            shown.append(f"![{name[:-4]}](figures/paper-{name})")
    tables = summary["tables"]
    from omtl_mpi.report import load_sweep
    from omtl_mpi.report.tables import metric_table, table3, table4
    sweep = load_sweep(summary["folder"])
    t2, t3, t4 = (metric_table(sweep, "mean_error"), table3(sweep, {k: v.get("target") for k, v in sweep.data.items()}),
                  table4(sweep))
    beside(t2, TABLE2)
    beside(t3, TABLE3)
    beside_ablation(t4)
    runs = [r for r in index["runs"].values() if r["status"] == "done"]
    hours = sum(r["seconds"] for r in runs) / 3600
    text = [
        "## The paper's comparison (Tables 2-4, Figure 1)", "",
        f"Generated by `make paper` on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC ({_machine()}): "
        "`omtl-mpi sweep scripts/paper.toml --out results/paper` then `omtl-mpi report results/paper`. "
        f"{summary['finished']} runs finished ({len(summary['not_done'])} failed, "
        f"{len(summary['missing'])} not run), {hours * 60:.0f} minutes of run time. "
        "What was scaled down, and why, is at the top of `scripts/paper.toml`: at most 4 ranks per run, "
        "D-PSGD in one process, 3 seeds (stream orders), substitute features. Every run has the "
        "paper's settings (`--preset paper`; the baselines their own defaults).", "",
        "In brackets beside our figures: the paper's (../shared/spec/PAPER_TABLES.md). Our "
        f"{', '.join(SUBSTITUTES)} features are substitutes for the paper's (docs/DATASETS.md), so "
        "there the paper's figures are for other features; Multi-Lingual is not available here.", "",
        "### Table 2: final mean cumulative error (mean ± std over 3 seeds)", "", _table(t2.markdown()), "",
        "### Table 2b: balanced error", "", _table(open(os.path.join(report, "table2-balanced.md")).read()), "",
        "### Table 2c: F1 of the positive class", "", _table(open(os.path.join(report, "table2-f1.md")).read()), "",
        "### Table 3: rounds to the paper's target accuracy, and ms per round", "",
        "The paper's cell is rounds / ms per round on its own machine and layout.", "",
        _table(t3.markdown()), "",
        "### Table 4: ablation", "", _table(t4.markdown()), "",
        "### Table 4b: ablation, balanced error", "",
        _table(open(os.path.join(report, "table4-balanced.md")).read()), "",
        "### Table 4c: ablation, F1 of the positive class", "",
        _table(open(os.path.join(report, "table4-f1.md")).read()), "",
        "### Figure 1", "", "![mean cumulative error against rounds](figures/paper-figure1.png)", "",
        "### Learned Omega and per-rank time (seed 0; every other run's are in results/paper/report)", "",
        *shown, "",
        "### Read off the tables", "", *[f"- {line}" for line in _facts(tables)],
    ]
    replace_section(docs, "paper", "\n".join(text))
    print(f"updated {docs} (section 'paper') and docs/figures/paper-*.png")


def main():
    args = sweep_arguments(__doc__, "paper", "1", "runs side by side (1 keeps ms/round clean)")
    code = import_sweep_report(args.shared, "paper.toml", args.out, args.jobs)
    if args.docs:
        summary = json.load(open(os.path.join(args.out, "report", "report.json")))
        index = json.load(open(os.path.join(args.out, "index.json")))
        write_docs(summary, index, os.path.join(ROOT, "docs", "RESULTS.md"))
    raise SystemExit(code)


if __name__ == "__main__":
    main()
