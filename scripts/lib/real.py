"""C-ADMM and D-ADMM (ring) on the paper's real data sets, imported from a folder of raw files.

Writes the section 'real' of docs/results/real.md (--docs-file: another file). Imports each set
found under --data with omtl-mpi's importers (into a temporary folder), gives its Table 1 row,
and runs C-ADMM on up to 5 ranks and D-ADMM ring on up to 4 ranks under mpiexec with the paper's
settings (`--preset paper`). Reports mean cumulative error, balanced error, F1 and the error of
always predicting each task's majority class (the bar to beat on imbalanced Landmine). A set
whose files are missing is left out; `make results` runs it with the tables synthetic and
learners.

Usage: python scripts/results.py real [--data DIR] [--docs-file FILE]

--data is the folder `omtl-mpi data fetch NAME --dest DIR` fills (landmine/LandmineData.mat,
mnist/mnist_restored.npz, tweeteval/, chem/tudataset/); default $DATA, else data/.
"""
from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np

from omtl_mpi.data import import_landmine, import_mnist, import_tudataset, import_tweeteval, info
from omtl_mpi.errors import UserError

from .docsection import LEARNING, ROOT, invocation, replace_section, stamp
from .omtlrun import run_json
from .paperfigures import TABLE2

DEPENDS = LEARNING + ("scripts/results.py", "scripts/lib/real.py", "scripts/lib/paperfigures.py",
                      "scripts/lib/omtlrun.py")
# the paper's Table 1: tasks / dims / samples / mean positive ratio
PAPER = {"Landmine": "29 / 9 / 14820 / .06", "MNIST": "5 / 512 / 60000 / .51",
         "TweetEval": "3 / 512 / 31671 / .41", "Chem": "6 / 64 / 7926 / .50"}
# name, its raw file or folder under --data (the first found of the alternatives, as
# `omtl-mpi data fetch` lays them out), the importer, the command the table names
SETS = [
    ("Landmine", ("landmine/LandmineData.mat",), import_landmine,
     "omtl-mpi data import landmine LandmineData.mat"),
    ("MNIST", ("mnist/mnist_restored.npz", "mnist"), lambda src, out: import_mnist(src, out, dims=512),
     "omtl-mpi data import mnist {src} --dims 512"),
    ("TweetEval", ("tweeteval",), lambda src, out: import_tweeteval(src, out, dims=512),
     "omtl-mpi data import tweeteval tweeteval/ --dims 512"),
    ("Chem", ("chem/tudataset",), import_tudataset, "omtl-mpi data import tudataset tudataset/"),
]


def run(path: str, algo: str, ranks: int) -> dict:
    return run_json(["--data", path, "--algo", algo, "--preset", "paper"]
                    + (["--topology", "ring"] if algo == "d-admm" else []), ranks)


def majority_error(path: str) -> float:
    """Mean over tasks of the error of always predicting the task's majority class."""
    from omtl_mpi.data.taskfile import load_tasks, read_meta
    meta = read_meta(path)
    ys = load_tasks(meta, np.arange(meta.n_tasks)).y
    return float(np.mean([min(np.mean(y == 1), np.mean(y == -1)) for y in ys]))


def measure(data: str) -> tuple[list, list]:
    """Table 1 rows (name, info, command) and result rows (name, algo, ranks, report, majority)
    of every set found under ``data``."""
    table1, table = [], []
    with tempfile.TemporaryDirectory() as folder:
        for name, rels, importer, cmd in SETS:
            src = next((os.path.join(data, r) for r in rels if os.path.exists(os.path.join(data, r))),
                       None)
            if src is None:
                print(f"{os.path.join(data, rels[0])} not found: {name} is left out", flush=True)
                continue
            cmd = cmd.format(src=os.path.basename(src) + ("/" if os.path.isdir(src) else ""))
            path = os.path.join(folder, f"{name}.h5")
            try:
                importer(src, path)
            except UserError as exc:            # a damaged file: its one-line reason
                raise SystemExit(f"error: {name}: {' '.join(exc.lines)}") from None
            f = info(path)
            table1.append((name, f, cmd))
            maj, k = majority_error(path), f["tasks"]
            for algo, ranks in (("c-admm", min(5, k + 1)), ("d-admm", min(4, k))):
                r = run(path, algo, ranks)
                table.append((name, algo, ranks, r, maj))
                print(f"{name:<10} {algo:<7} error {r['mean_error']:.4f} BER {r['balanced_error']:.4f} "
                      f"F1 {r['f1']:.4f} majority {maj:.4f} {r['ms_per_round']:.3f} ms/round", flush=True)
    return table1, table


def section(table1: list, table: list) -> str:
    """The section's text: stamp, results table, verdicts against the majority rule, Table 1."""
    lines = [
        stamp(invocation(), DEPENDS) + " From a folder of the real data sets (docs/DATASETS.md, "
        "`omtl-mpi data fetch`; docs/DATASETS.md also describes the features). The paper's "
        "settings (`--preset paper`); C-ADMM on up to 5 ranks (server + 4 workers), D-ADMM on a "
        "ring of up to 4 ranks (fewer when there are fewer tasks), under mpiexec. *majority* is "
        "the mean over tasks of the error of always predicting the task's majority class; "
        "*paper* is the paper's Table 2 figure (D-ADMM: its ring), for its own features where "
        "ours are substitutes.", "",
        "| data set | learner | mean cumulative error | paper, Table 2 | balanced error | F1 (positive) | majority | ms/round |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, algo, ranks, r, maj in table:
        paper = TABLE2["C-ADMM" if algo == "c-admm" else "D-ADMM ring"].get(name)
        lines.append(f"| {name} | {algo} ({ranks} ranks) | {r['mean_error']:.4f} | "
                     f"{'' if paper is None else f'{paper:.3f}'} | {r['balanced_error']:.4f} | "
                     f"{r['f1']:.4f} | {maj:.4f} | {r['ms_per_round']:.3f} |")
    lines.append("")
    for name, algo, ranks, r, maj in table:
        if algo == "c-admm":
            verdict = "below" if r["mean_error"] < maj else "above"
            lines.append(f"- {name}: C-ADMM's mean cumulative error {r['mean_error']:.4f} is "
                         f"{verdict} the majority-class error {maj:.4f}; balanced error "
                         f"{r['balanced_error']:.4f} (0.5 for the majority rule).")
    lines += ["", "These are the paper's untuned settings, measured; tuning per data set is the "
              "job of `omtl-mpi sweep`.", "",
              "Table 1 rows of the imported files (`omtl-mpi data info`):", "",
              "| data set | import command | tasks / dims / samples / mean positive ratio | paper |",
              "|---|---|---|---|"]
    for name, f, cmd in table1:
        lines.append(f"| {name} | `{cmd}` | {f['tasks']} / {f['dims']} / {f['total']} / "
                     f"{f['positive_ratio']:.3f} | {PAPER[name]} |")
    return "\n".join(lines)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--data", default=os.environ.get("DATA") or os.path.join(ROOT, "data"),
                    help="folder of the raw real data sets ($DATA when set, else data/)")
    ap.add_argument("--docs-file", default=os.path.join(ROOT, "docs", "results", "real.md"),
                    help="the Markdown file whose section 'real' is written")


def main(args: argparse.Namespace) -> None:
    if not os.path.isdir(args.data):
        raise SystemExit(f"error: no real data in {args.data}: run `omtl-mpi data fetch NAME "
                         "--dest DIR` and give --data DIR (or DATA=DIR)")
    table1, table = measure(args.data)
    if not table:
        raise SystemExit(f"error: none of the real data sets is under {args.data} "
                         "(landmine/, mnist/, tweeteval/, chem/tudataset/)")
    replace_section(args.docs_file, "real", section(table1, table))
    print(f"wrote {args.docs_file}")

