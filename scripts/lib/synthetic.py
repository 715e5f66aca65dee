"""C-ADMM on the paper's synthetic data (5 x 10000, seed 0) against learning each task alone.

Writes the section 'c-admm' of docs/results/synthetic.md (--docs-file: another file). Every
figure in its table is computed here, in one process (the MPI runs give the same numbers to
1e-10; tests/test_equivalence.py proves it): about 15 seconds on 2 cores. `make results` runs
it with the tables learners and real.

Usage: python scripts/results.py synthetic [--tasks 5] [--samples 10000] [--docs-file FILE]
"""
from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np

from omtl_mpi.algorithms.admm import AdmmParams
from omtl_mpi.config import RunConfig
from omtl_mpi.data import generate, write_tasks
from omtl_mpi.runtime.run import run

from .docsection import LEARNING, ROOT, invocation, replace_section, stamp

DEPENDS = LEARNING + ("scripts/results.py", "scripts/lib/synthetic.py")
# the authors' public code's settings (docs/PAPER.md)
PAPER_CODE = dict(loss="perceptron", rho=0.5, eta=240.0, lambda1=0.1, lambda3=0.1, lambda4=0.1,
                  lambda2=20.0)
PAPER_CODE_ARGS = ("--loss perceptron --rho 0.5 --eta 240 --lambda1 0.1 --lambda3 0.1 "
                   "--lambda4 0.1 --lambda2 20")
# (row label, the row's parameters, its options after `omtl-mpi run --preset paper`)
ROWS = [
    ("C-ADMM exact, hinge, the paper's settings", AdmmParams.paper(), ""),
    ("C-ADMM exact, without relationship learning (Omega = I/K)",
     AdmmParams.paper(relationship=False), "--no-relationship"),
    ("C-ADMM paper variant (printed closed forms), hinge", AdmmParams.paper(variant="paper"),
     "--variant paper"),
    ("C-ADMM exact, logistic", AdmmParams.paper(loss="logistic"), "--loss logistic"),
    ("C-ADMM exact, perceptron", AdmmParams.paper(loss="perceptron"), "--loss perceptron"),
    ("C-ADMM paper variant, perceptron, the public code's settings",
     AdmmParams.paper(variant="paper", **PAPER_CODE), f"--variant paper {PAPER_CODE_ARGS}"),
    ("C-ADMM exact, perceptron, the public code's settings", AdmmParams.paper(**PAPER_CODE),
     PAPER_CODE_ARGS),
]


def single_task(folder: str, tasks: int, samples: int, params: AdmmParams) -> float:
    """Mean over tasks of each task learned alone (the C-ADMM math with K = 1, no lambda4)."""
    names, X, y = generate(tasks=tasks, samples=samples, seed=0)
    errors = []
    for k in range(tasks):
        path = os.path.join(folder, f"task{k}.h5")
        write_tasks(path, [names[k]], [X[k]], [y[k]])
        errors.append(run(RunConfig(data=path, intercept=False, params=params))["mean_error"])
    return float(np.mean(errors))


def measure(tasks: int, samples: int) -> list:
    """(label, error, balanced error, F1, command) per row; the first is each task alone."""
    size = [] if (tasks, samples) == (5, 10000) else [f"--synth-tasks {tasks}",
                                                      f"--synth-samples {samples}"]
    with tempfile.TemporaryDirectory() as folder:
        alone = single_task(folder, tasks, samples, AdmmParams.paper(lambda4=0.0, relationship=False))
    rows = [("each task alone (C-ADMM math, K = 1, lambda4 = 0)", alone, None, None,
             f"scripts/results.py synthetic ({tasks} one-task files)")]
    print(f"{rows[0][0]:<62} {alone:.4f}", flush=True)
    for label, params, options in ROWS:
        rep = run(RunConfig(intercept=False, params=params, synth_tasks=tasks,
                            synth_samples=samples))
        cmd = " ".join(["omtl-mpi run --preset paper", *size, options]).strip()
        rows.append((label, rep["mean_error"], rep["balanced_error"], rep["f1"], cmd))
        print(f"{label:<62} {rep['mean_error']:.4f}", flush=True)
    return rows


def _cell(value) -> str:
    return "" if value is None else f"{value:.4f}"


def section(rows: list, tasks: int, samples: int) -> str:
    """The section's text: stamp, table, and what the figures say (each computed here)."""
    alone, multi, no_rl = rows[0][1], rows[1][1], rows[2][1]
    lines = [
        stamp(invocation(), DEPENDS) + f" Data: `omtl-mpi data synth` ({tasks} tasks x "
        f"{samples} instances, seed 0, not normalised); one pass, each instance predicted before "
        "its label is revealed. Every row runs the paper's model (`--preset paper`: no "
        "intercept, the paper's settings) in one process; under mpiexec the predictions are "
        "identical (tests/test_equivalence.py).", "",
        "| learner | command | final mean cumulative error | balanced error | F1 (positive) |",
        "|---|---|---|---|---|",
        *[f"| {label} | `{cmd}` | {err:.4f} | {_cell(ber)} | {_cell(f1)} |"
          for label, err, ber, f1, cmd in rows], "",
        f"With relationship learning the mean cumulative error is {multi:.4f}, against "
        f"{alone:.4f} for each task alone ({100 * (alone - multi) / alone:+.1f}% relative gain) "
        f"and {no_rl:.4f} without the Omega update (Omega = I/K, the ablation: "
        f"{100 * (alone - no_rl) / alone:+.1f}% against each task alone).", "",
        "The authors' public code reproduces the paper's C-ADMM figure of about 0.136-0.138 with "
        "its own settings (perceptron, rho = 0.5, eta = 240, lambda1 = lambda3 = lambda4 = 0.1, "
        f"lambda2 = 20; docs/PAPER.md). With the paper variant they give {rows[6][1]:.4f} here "
        "(our synthetic draw is a fresh sample of the same family; the paper's file is not "
        f"available), with the exact variant {rows[7][1]:.4f}. The paper variant is sensitive "
        "to rounding: its printed '+' sign on the lambda4 term feeds V back into itself, so "
        "last-bit differences in the eigendecomposition can move its figure; the exact variant "
        "has no such feedback.",
    ]
    return "\n".join(lines)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--tasks", type=int, default=5, help="tasks K of the synthetic family (5)")
    ap.add_argument("--samples", type=int, default=10000, help="instances per task (10000)")
    ap.add_argument("--docs-file", default=os.path.join(ROOT, "docs", "results", "synthetic.md"),
                    help="the Markdown file whose section 'c-admm' is written")


def main(args: argparse.Namespace) -> None:
    if args.tasks < 1 or args.samples < 1:
        raise SystemExit("error: --tasks and --samples must be at least 1")
    rows = measure(args.tasks, args.samples)
    replace_section(args.docs_file, "c-admm", section(rows, args.tasks, args.samples))
    print(f"wrote {args.docs_file}")

