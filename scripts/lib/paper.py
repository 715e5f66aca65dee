#!/usr/bin/env python
"""Reproduce the paper's comparison: import the real data sets found locally, run the sweep
scripts/paper.toml, build its report, and (with --docs) write the tables into
docs/results/paper.md (section 'paper') and its figures into docs/figures.

Usage: python scripts/paper.py [--data DIR] [--config FILE] [--out DIR] [--jobs N]
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
import subprocess
import sys
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from docsection import SWEEPS, figure_link, invocation, replace_section, stamp  # noqa: E402
from paperfigures import SUBSTITUTES, TABLE2, TABLE3, beside, beside_ablation  # noqa: E402

OMTL = [sys.executable, "-m", "omtl_mpi"]
# data set -> (its raw files under --data, the first found of the alternatives, as
# `omtl-mpi data fetch` lays them out; import arguments); the output file is NAME.h5
IMPORTS = {
    "landmine": (("landmine/LandmineData.mat",), ["landmine", "{src}"]),
    # the mirrors' npz, or the folder of the four idx files the canonical source serves
    "mnist": (("mnist/mnist_restored.npz", "mnist/train-images-idx3-ubyte.gz"),
              ["mnist", "{src}", "--dims", "512"]),
    # the paper's 512 features, whatever the importer's default dimension
    "tweeteval": (("tweeteval",), ["tweeteval", "{src}", "--dims", "512"]),
    "chem": (("chem/tudataset",), ["tudataset", "{src}"]),
}
# report figures copied next to the docs (the rest stay in results/paper/report)
EXTRA_FIGURES = ("omega-landmine.c-admm.s0.png", "omega-synthetic.c-admm.s0.png",
                 "timing-synthetic.c-admm.s0.png", "timing-synthetic.d-admm-ring.s0.png")
DEPENDS = SWEEPS + ("scripts/paper.py", "scripts/paperfigures.py")
# two errors closer than this are the same: a mean over tasks of counts can differ from another
# of the same counts in the last bits, and with one seed the spread is 0
TIE = 1e-9


def step(cmd: list, check: bool = True) -> int:
    """Run ``cmd`` from the repository's root, printed first (``omtl-mpi`` for this Python's
    package); stop with its exit status if it fails and ``check``."""
    shown = ["omtl-mpi"] + cmd[len(OMTL):] if cmd[:len(OMTL)] == OMTL else cmd
    print("$ " + " ".join(shown), flush=True)
    code = subprocess.run(cmd, cwd=ROOT).returncode
    if check and code != 0:
        raise SystemExit(code)
    return code


def synth_unless_exists(out: str, args) -> None:
    """``omtl-mpi data synth -o out ARGS``, unless ``out`` exists (a drawn file is kept: delete
    it to draw again)."""
    if os.path.exists(out):
        print(f"{out} exists; not drawn again (delete it to draw again)")
        return
    os.makedirs(os.path.dirname(out), exist_ok=True)
    step(OMTL + ["data", "synth", "-o", out, *map(str, args)])


def sweep_files(config: str) -> dict:
    """File name -> absolute path of every data file the sweep file ``config`` reads (its
    ``path`` keys, relative to the sweep file); empty if the file is not valid TOML (the sweep
    itself then says why)."""
    try:
        with open(config, "rb") as f:
            doc = tomllib.load(f)
    except tomllib.TOMLDecodeError:
        return {}
    base = os.path.dirname(os.path.abspath(config))
    paths = [os.path.normpath(os.path.join(base, entry["path"]))
             for entry in doc.get("data", {}).values()
             if isinstance(entry, dict) and isinstance(entry.get("path"), str)]
    return {os.path.basename(p): p for p in paths}


def raw_source(data: str, name: str) -> str | None:
    """The path to import data set ``name`` from: the first of its alternatives found under
    ``data`` (an idx file stands for its folder); None if there is none."""
    for rel in IMPORTS[name][0]:
        path = os.path.join(data, rel)
        if os.path.exists(path):
            return os.path.dirname(path) if path.endswith("-ubyte.gz") else path
    return None


def import_data(data: str, wanted: dict) -> None:
    """Import each real set of :data:`IMPORTS` that ``wanted`` (:func:`sweep_files`) names,
    into the path named there, unless that file exists or the raw files are not under ``data``."""
    for name, (rels, args) in IMPORTS.items():
        out = wanted.get(f"{name}.h5")
        if out is None:
            continue
        src = raw_source(data, name)
        if os.path.exists(out):
            print(f"{out} exists; not imported again (delete it to re-import)")
        elif src is None:
            print(f"{os.path.join(data, rels[0])} not found: {name} is left out of the sweep")
        else:
            os.makedirs(os.path.dirname(out), exist_ok=True)
            step(OMTL + ["data", "import"] + [a.format(src=src) for a in args] + ["-o", out])


def sweep_arguments(doc: str, name: str, jobs: str, jobs_help: str,
                    figures: bool = False) -> argparse.Namespace:
    """The command line shared by the sweep scripts (``figures``: with --figures). ``docs_file``
    is None without --docs or --docs-file; every path is absolute."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--data", default=os.environ.get("DATA") or os.path.join(ROOT, "data"),
                    help="folder of the raw real data sets, as `omtl-mpi data fetch NAME --dest "
                         "DIR` fills it ($DATA when set)")
    ap.add_argument("--config", default=os.path.join(ROOT, "scripts", f"{name}.toml"),
                    help="the sweep file")
    ap.add_argument("--out", default=os.path.join(ROOT, "results", name),
                    help="the sweep's folder (its report goes to OUT/report)")
    ap.add_argument("--jobs", default=jobs, help=jobs_help)
    ap.add_argument("--docs", action="store_true",
                    help=f"write the section '{name}' of docs/results/{name}.md")
    ap.add_argument("--docs-file", metavar="FILE",
                    help=f"write the section '{name}' into FILE instead (implies --docs)")
    if figures:
        ap.add_argument("--figures", default=os.path.join(ROOT, "docs", "figures"),
                        help="folder the section's figures are copied into")
    args = ap.parse_args()
    if not os.path.isfile(args.config):
        raise SystemExit(f"error: sweep file {args.config} not found")
    if args.docs_file is None and args.docs:
        args.docs_file = os.path.join(ROOT, "docs", "results", f"{name}.md")
    for key in ("data", "config", "out", "figures", "docs_file"):
        if getattr(args, key, None) is not None:
            setattr(args, key, os.path.abspath(getattr(args, key)))
    return args


def with_config(depends: tuple, config: str) -> tuple:
    """``depends`` and the sweep file ``config`` (from the repository's root) when it is in the
    repository: what a generated section's figures depend on."""
    rel = os.path.relpath(config, ROOT)
    return depends + (() if rel.startswith("..") else (rel,))


def import_sweep_report(data: str, config: str, out: str, jobs: str) -> int:
    """Import the local real sets that the sweep file ``config`` reads, run the sweep into
    ``out`` and build its report; the sweep's exit code."""
    import_data(data, sweep_files(config))
    return sweep_and_report(config, out, jobs)


def sweep_and_report(config: str, out: str, jobs: str) -> int:
    """Run the sweep file ``config`` into ``out`` and build its report; the sweep's exit code."""
    code = step(OMTL + ["sweep", config, "--out", out, "--jobs", jobs], check=False)
    if code == 130:                     # interrupted: no report of half a sweep
        raise SystemExit(code)
    step(OMTL + ["report", out])
    return code


def shown_path(path: str) -> str:
    """``path`` as the docs name it: relative to the repository when inside it."""
    rel = os.path.relpath(path, ROOT)
    return path if rel.startswith("..") else rel


def seeds_of(sweep) -> str:
    """How many seeds the sweep's finished runs used, in words: ``3 seeds``, ``1 seed``."""
    n = len({o.seed for o in sweep.outcomes})
    return f"{n} seed{'s' if n != 1 else ''}"


def seed_list(sweep) -> str:
    """The seeds (stream orders) of the sweep's finished runs: ``0, 1, 2``."""
    return ", ".join(str(s) for s in sorted({o.seed for o in sweep.outcomes}, key=lambda s: s or 0))


def layout_of(sweep) -> str:
    """Where the finished runs ran, in words: one process, or the range of ranks."""
    ranks = sorted({o.ranks for o in sweep.outcomes}) or [1]
    return ("every run in one process" if ranks == [1]
            else f"runs on {ranks[0]} to {ranks[-1]} ranks")


def _table(md: str) -> str:
    """A report table without its '###' title line."""
    return "\n".join(line for line in md.splitlines() if not line.startswith("### ")).strip()


def metric_sections(sweep, err, bal, f1) -> list:
    """Lines of a generated section: the error, balanced error and F1 tables (report tables of
    the same runs), each under its heading."""
    return [f"## Final mean cumulative error (mean ± std over {seeds_of(sweep)})", "",
            _table(err.markdown()), "", "## Balanced error", "", _table(bal.markdown()), "",
            "## F1 of the positive class", "", _table(f1.markdown()), ""]


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
        stamp(invocation("make paper", ("--docs",)), with_config(DEPENDS, config)) + " It runs "
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
        return _table(open(os.path.join(report, name)).read())
    text = [
        *_header(summary, hours, args.config, args.out),
        f"## Table 2: final mean cumulative error (mean ± std over {seeds_of(sweep)})", "",
        _table(t2.markdown()), "",
        "## Table 2b: balanced error", "", report_table("table2-balanced.md"), "",
        "## Table 2c: F1 of the positive class", "", report_table("table2-f1.md"), "",
        "## Table 3: rounds to the paper's target accuracy, and ms per round", "",
        "The paper's cell is rounds / ms per round on its own machine and layout.", "",
        _table(t3.markdown()), "",
        "## Table 4: ablation", "", _table(t4.markdown()), "",
        "## Table 4b: ablation, balanced error", "", report_table("table4-balanced.md"), "",
        "## Table 4c: ablation, F1 of the positive class", "", report_table("table4-f1.md"), "",
        "## Figure 1", "", f"![mean cumulative error against rounds]({figure1})", "",
        f"## Learned Omega and per-rank time (seed 0; every other run's are in "
        f"{shown_path(report)})", "", *shown, "",
        "## Read off the tables", "", *[f"- {line}" for line in _facts(summary["tables"])],
    ]
    replace_section(args.docs_file, "paper", "\n".join(text))
    print(f"updated {args.docs_file} (section 'paper') and {args.figures}/paper-*.png")


def main():
    args = sweep_arguments(__doc__, "paper", "1", "runs side by side (1 keeps ms/round clean)",
                           figures=True)
    code = import_sweep_report(args.data, args.config, args.out, args.jobs)
    if args.docs_file:
        summary = json.load(open(os.path.join(args.out, "report", "report.json")))
        index = json.load(open(os.path.join(args.out, "index.json")))
        write_docs(summary, index, args)
    raise SystemExit(code)


if __name__ == "__main__":
    main()
