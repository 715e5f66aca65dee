"""Step 10 (c): the mixture prior's settings on the selection sets it acts on.

The mixture prior is used only with more tasks than features, so of the selection sets it acts
on Landmine, the paper's family at K = 1,024 (draw 100) and the personal draws (K = 2,000 with
4 groups, and K = 3,000, d = 30, median 8 with 8 and 16 groups; draws 100, 101, 102); on the
others every candidate is today's vote, to the bit. Each candidate sets the module constants of
omtl_mpi.algorithms.mixture / .bayes in the run's own process (one process, `omtl-mpi run`),
which is what the package would ship if it were chosen. Prints a Markdown table of the mean
per-task error, and for the personal draws the distance to the membership floor.

Usage: python experiments/groups_search.py [--data-dir results/data] [--landmine FILE]
                                           [--only NAME ...]
The personal draws (by scripts/lib/personal.py's draw) and the K = 1,024 draw are written into
--data-dir when missing, their commands printed before the table; Landmine
is read from --landmine (omtl-mpi data import landmine LandmineData.mat -o FILE).
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from lib import personal  # noqa: E402

OMTL = [sys.executable, "-m", "omtl_mpi"]
# name: (mixture.GROUPS, mixture.EM_STEPS, bayes.GROWTH)
CANDIDATES = {"today (8 components, 10 EM steps, growth 1.2)": (8, 10, 1.2),
              "16 components": (16, 10, 1.2),
              "32 components": (32, 10, 1.2),
              "16 components, 20 EM steps": (16, 20, 1.2),
              "8 components, growth 1.1": (8, 10, 1.1),
              "16 components, growth 1.1": (16, 10, 1.1)}
# run `omtl-mpi run ARGS` with the candidate's constants set before the package runs
RUNNER = """
import sys
import omtl_mpi.algorithms.bayes as bayes
import omtl_mpi.algorithms.mixture as mixture
G, steps, growth = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
mixture.GROUPS, mixture.EM_STEPS, bayes.GROWTH = G, steps, growth
for f in (mixture.sums_size, mixture.split_sums, mixture.first_centres, mixture.m_step):
    f.__defaults__ = (G,)
sys.argv = ["omtl-mpi", "run", *sys.argv[4:]]
import runpy
runpy.run_module("omtl_mpi", run_name="__main__")
"""


def sets(data_dir: str, landmine: str) -> tuple:
    """name -> (file, [extra options of each run]) of the sets the mixture acts on, and name ->
    (tasks, seed, family options) of the personal draws among them."""
    out, draws = {}, {}
    if landmine and os.path.exists(landmine):
        out["Landmine"] = (landmine, [["--seed", str(s)] for s in (0, 1, 2)])
    # draw 100 from the step's start; 101 and 102 from its (b) second round on
    for seed in (100, 101, 102):
        paper = os.path.join(data_dir, f"paper-1024-1000-{seed}.h5")
        if not os.path.exists(paper):
            subprocess.run(OMTL + ["data", "synth", "--tasks", "1024", "--samples", "1000",
                                   "--seed", str(seed), "-o", paper], check=True)
        out[f"paper K = 1,024, draw {seed}"] = (paper, [["--seed", str(s)] for s in (0, 1, 2)])
    files = {}
    for tasks, groups, dims, median in ((2000, 4, 20, 15), (3000, 8, 30, 8), (3000, 16, 30, 8)):
        for seed in (100, 101, 102):
            file = f"personal-{tasks}-g{groups}-d{dims}-m{median}-{seed}.h5"
            files[file] = os.path.join(data_dir, file)
            name = f"personal {groups} groups, draw {seed}"
            out[name] = (files[file], [[]])
            draws[name] = (tasks, seed, personal.family(personal.FILE.match(file)))
    personal.draw(files)
    return out, draws


def arguments(doc: str, *more) -> argparse.Namespace:
    """The options of a step-10 search (``more``: (flags, add_argument's keywords) pairs)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--data-dir", default="results/data")
    ap.add_argument("--landmine", default="results/data/landmine.h5")
    ap.add_argument("--only", nargs="*", help="candidates by name (default: all)")
    for flags, options in more:
        ap.add_argument(*flags, **options)
    args = ap.parse_args()
    os.makedirs(args.data_dir, exist_ok=True)
    return args


def header(names: list, floors: dict, summaries: list) -> None:
    """The table's head and its membership-floor row, with the columns ``summaries`` last."""
    print("| candidate | " + " | ".join(names + summaries) + " |")
    print("|---|" + "---|" * (len(names) + len(summaries)))
    print("| membership floor | " + " | ".join(
        [f"{floors[n]:.4f}" if n in floors else "" for n in names] + [""] * len(summaries))
        + " |", flush=True)


def main() -> None:
    args = arguments(__doc__)
    todo, draws = sets(args.data_dir, args.landmine)
    names = list(todo)
    floors = personal.mean_floors(draws)
    header(names, floors, ["personal: mean above the floor"])
    for label, (G, steps, growth) in CANDIDATES.items():
        if args.only and label not in args.only:
            continue
        row = []
        for name in names:
            path, runs = todo[name]
            row.append(np.mean([json.loads(subprocess.run(
                [sys.executable, "-c", RUNNER, str(G), str(steps), str(growth), "--data", path,
                 *extra, "--json"], check=True, capture_output=True, text=True).stdout)["mean_error"]
                for extra in runs]))
        above = np.mean([row[i] - floors[n] for i, n in enumerate(names) if n in floors])
        print(f"| {label} | " + " | ".join(f"{v:.4f}" for v in row) + f" | {above:+.4f} |",
              flush=True)


if __name__ == "__main__":
    main()
