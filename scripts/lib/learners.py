"""Every learner on the paper's synthetic data (5 x 10000, seed 0): error and time per round.

Writes the section 'learners' of docs/results/learners.md (--docs-file: another file). Each
learner runs once in one process (its error: deterministic, and the same under MPI, see
tests/test_algorithm_checks.py) and --repeats times under mpiexec in its own layout: server
learners on K+1 ranks, neighbour learners on a ring of K ranks, learners without
communication on K ranks. The median ms per round is reported. `make results` runs it with
the tables synthetic and real.

Usage: python scripts/results.py learners [--repeats 3] [--tasks 5] [--samples 10000]
                                          [--algos A,B] [--docs-file FILE]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

from omtl_mpi.algorithms import REGISTRY

from .docsection import LEARNING, ROOT, invocation, replace_section, stamp
from .omtlrun import run_json
from .paperfigures import TABLE2

DEPENDS = LEARNING + ("scripts/results.py", "scripts/lib/learners.py", "scripts/lib/paperfigures.py",
                      "scripts/lib/omtlrun.py")
ORDER = ["c-admm", "d-admm", "admm-single", "pmsc-log", "drom", "d-psgd", "pa", "mt-perceptron", "pooled"]
# the paper's row for each learner (Table 2; the decentralised ones on a ring, as run here)
PAPER_ROW = {"c-admm": "C-ADMM", "d-admm": "D-ADMM ring", "admm-single": "ADMM-Single",
             "pmsc-log": "PMSC-Log (reconstruction)", "drom": "DROM (reconstruction)",
             "d-psgd": "D-PSGD ring"}


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--repeats", type=int, default=3, help="mpiexec runs of every learner (3)")
    ap.add_argument("--tasks", type=int, default=5, help="tasks K of the synthetic family (5)")
    ap.add_argument("--samples", type=int, default=10000, help="instances per task (10000)")
    ap.add_argument("--algos", help="comma-separated learners (default: every registered one)")
    ap.add_argument("--docs-file", default=os.path.join(ROOT, "docs", "results", "learners.md"),
                    help="the Markdown file whose section 'learners' is written")


def check_arguments(args: argparse.Namespace) -> argparse.Namespace:
    """Stop with one line on a bad count or an unknown learner; ``args.names``: the learners."""
    if min(args.repeats, args.tasks, args.samples) < 1:
        raise SystemExit("error: --repeats, --tasks and --samples must be at least 1")
    every = [n for n in ORDER if n in REGISTRY] + sorted(set(REGISTRY) - set(ORDER))
    args.names = every if args.algos is None else args.algos.split(",")
    unknown = [n for n in args.names if n not in REGISTRY]
    if unknown:
        raise SystemExit(f"error: --algos: unknown learner {unknown[0]} (known: {', '.join(every)})")
    return args


def measure(args, data: str) -> list:
    """(name, registry entry, one-process report, MPI ranks, median MPI ms per round) per learner."""
    rows = []
    for name in args.names:
        algo = REGISTRY[name]
        base = ["--data", data, "--algo", name, "--preset", "paper"]
        if algo.pattern == "neighbours":
            base += ["--topology", "ring"]
        single = run_json(base)
        ranks = args.tasks + 1 if algo.pattern == "server" else args.tasks
        ms = statistics.median(run_json(base, ranks)["ms_per_round"] for _ in range(args.repeats))
        rows.append((name, algo, single, ranks, ms))
        print(f"{name:<14} error {single['mean_error']:.4f}  {single['ms_per_round']:.4f} ms/round "
              f"in one process, {ms:.4f} on {ranks} ranks", flush=True)
    return rows


def section(args, rows: list) -> str:
    """The section's text: stamp, what ran, the table, and which learner did best."""
    lines = [
        stamp(invocation(), DEPENDS) + f" Data: `omtl-mpi data synth` ({args.tasks} tasks x "
        f"{args.samples}, seed 0). Settings: `--preset paper` (the paper's model for the ADMM "
        "learners, no intercept for every learner; each learner's other hyper-parameters its "
        "defaults, `omtl-mpi algos`). Error: final mean cumulative error, one process (the MPI "
        "runs make the same predictions). Time: median ms per round of "
        f"{args.repeats} run{'s' if args.repeats > 1 else ''} under mpiexec in the learner's own "
        "layout, and of one run in one process. The last column is the paper's Table 2 figure "
        "on its own draw of the same family (docs/PAPER.md); the public code's settings "
        "reproduce its C-ADMM figure (docs/results/synthetic.md).", "",
        "| learner | communication | reconstruction | mean cumulative error | balanced error | "
        "F1 (positive) | ms/round (1 process) | ms/round (MPI) | MPI ranks | paper, Table 2 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, algo, single, ranks, ms in rows:
        row = TABLE2.get(PAPER_ROW.get(name, ""), {})
        paper = f"{row['Synthetic']:.3f}" if "Synthetic" in row else ""
        lines.append(f"| {name} | {algo.pattern} | {'yes' if algo.reconstruction else 'no'} | "
                     f"{single['mean_error']:.4f} | {single['balanced_error']:.4f} | "
                     f"{single['f1']:.4f} | {single['ms_per_round']:.4f} | {ms:.4f} | {ranks} | {paper} |")
    best = min(rows, key=lambda r: r[2]["mean_error"])
    lines += ["", f"Lowest error: {best[0]} ({best[2]['mean_error']:.4f})"]
    cadmm = next((r for r in rows if r[0] == "c-admm"), None)
    if cadmm is not None:
        lines[-1] += f"; C-ADMM with the paper's settings: {cadmm[2]['mean_error']:.4f}"
    lines[-1] += "."
    return "\n".join(lines)


def main(args: argparse.Namespace) -> None:
    args = check_arguments(args)
    with tempfile.TemporaryDirectory() as folder:
        data = os.path.join(folder, "synthetic.h5")
        subprocess.run([sys.executable, "-m", "omtl_mpi", "data", "synth", "-o", data,
                        "--tasks", str(args.tasks), "--samples", str(args.samples)],
                       check=True, capture_output=True)
        rows = measure(args, data)
    replace_section(args.docs_file, "learners", section(args, rows))
    print(f"wrote {args.docs_file}")

